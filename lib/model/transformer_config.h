#pragma once
// Architecture numbers and family switches of the LLaMA-family transformer.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace sjd::model {

enum class RopeKind { k1d, k2d };          // rotate-half 1D (HF) | LlamaGen 2D interleaved
enum class KeyStyle { kHf, kLlamaGen };    // checkpoint tensor names

struct TransformerConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  double norm_eps = 1e-5;
  RopeKind rope = RopeKind::k1d;
  double rope_theta = 10000.0;
  bool qk_norm = false;
  double qk_norm_eps = 1e-5;
  KeyStyle key_style = KeyStyle::kHf;
  // LlamaGen: width of the image grid for 2D RoPE, and the caption length whose
  // slots get no rotation (and zeroed q/k).
  int64_t grid_width = 0;
  int64_t caption_length = 0;
};

// Reads the bundle's "transformer" object; `where` names it in errors (e.g.
// "models/x/bundle.json: transformer").
TransformerConfig parse_transformer_config(const nlohmann::json& j, const std::string& where);

}  // namespace sjd::model
