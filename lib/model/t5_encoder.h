#pragma once
// The encoder half of T5 v1.1 / FLAN-T5 (Hugging Face `T5EncoderModel`), the
// text encoder LlamaGen conditions on. float32 on ATen:
//   x = shared[ids]
//   per block: x += o(attn(rms(x))), attention scores q.k (no 1/sqrt(d) scale)
//              + a learned relative-position bias shared by every block (stored
//              in block 0), pad keys masked;
//              x += wo(gelu_tanh(wi_0 rms(x)) * wi_1 rms(x))
//   out = rms(x) with the final norm weight.
// rms(x) = w * x / sqrt(mean(x^2) + eps): T5's norm, no mean subtraction or bias.
#include <ATen/ATen.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "io/weights.h"

namespace sjd::model {

struct T5Config {
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t d_kv = 0;  // per-head width
  int64_t d_ff = 0;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  double layer_norm_epsilon = 1e-6;
};

// Reads the numbers of a bundle's "text_encoder" object (HF config.json names:
// vocab_size, d_model, num_layers, num_heads, d_kv, d_ff,
// relative_attention_num_buckets, relative_attention_max_distance,
// layer_norm_epsilon, feed_forward_proj). Only the gated-GELU feed-forward
// (T5 v1.1, FLAN-T5) is supported. Errors name `where` and the key.
T5Config parse_t5_config(const nlohmann::json& j, const std::string& where);

// T5's bidirectional relative-position bucket of key position minus query
// position: half the buckets for keys before the query, half for keys after;
// within each half, distances below num_buckets/4 get their own bucket and
// larger ones share logarithmically wider buckets up to max_distance.
int64_t t5_relative_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance);

class T5Encoder {
 public:
  // Takes `shared.weight` and `encoder.*` tensors (HF key names), each checked
  // against the config; a missing or mis-shaped tensor throws io::WeightError
  // naming it and its file.
  T5Encoder(T5Config config, const io::WeightMap& weights);

  const T5Config& config() const { return config_; }

  // ids [T] -> last hidden state [T, d_model] (float32). `mask` (empty = all
  // valid) marks pad tokens with 0: no token attends to them, as with HF's
  // attention_mask. Throws std::invalid_argument for an id outside the
  // vocabulary, a mask of the wrong length, or no valid token.
  at::Tensor encode(const std::vector<int64_t>& ids, const std::vector<uint8_t>& mask = {}) const;

 private:
  struct Block {
    at::Tensor attn_norm, q, k, v, o;  // projections [out, in]
    at::Tensor ff_norm, wi_0, wi_1, wo;
  };

  // [heads, T, T] relative-position bias for T tokens.
  at::Tensor position_bias(int64_t tokens) const;

  T5Config config_;
  at::Tensor shared_;                // [vocab, d_model]
  at::Tensor relative_bias_;         // [buckets, heads]
  std::vector<Block> blocks_;
  at::Tensor final_norm_;
};

}  // namespace sjd::model
