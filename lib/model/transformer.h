#pragma once
// One LLaMA-family decoder for all three families: RMSNorm, SwiGLU, RoPE (1D
// or 2D), GQA, optional Chameleon qk-norm, fused or separate qkv (resolved at
// load time). Prefill and window steps share one forward over a set of new
// tokens at given positions, attending to the static KV cache through an
// explicit mask (causal chain or draft tree).
#include <ATen/ATen.h>

#include <vector>

#include "model/kv_cache.h"
#include "model/token_model.h"
#include "model/transformer_config.h"
#include "model/transformer_weights.h"

namespace sjd::model {

class Transformer : public TokenModel {
 public:
  Transformer(TransformerConfig config, TransformerWeights weights);

  const TransformerConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  // Where the weights, the KV cache and every activation live.
  at::Device device() const { return weights_.embed.device(); }
  at::ScalarType dtype() const { return weights_.embed.scalar_type(); }

  void start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window) override;
  // Logits on the CPU, for the decoding loop's CPU pipeline and verifier.
  at::Tensor forward(const std::vector<int64_t>& roots, const DraftTree& nodes) override;
  // The same logits left on the model's device (the CUDA pipeline and the bench read them there).
  at::Tensor window_logits(const std::vector<int64_t>& roots, const DraftTree& nodes);
  void commit(const std::vector<int>& path) override;
  // Drops the last `tokens` committed tokens of every row; the next window's
  // root is then the first dropped token again.
  void rollback(int64_t tokens);

  // Lower level, for tests and prefill: embeddings of `tokens` for every row.
  at::Tensor embed(const at::Tensor& tokens) const;
  // Runs new tokens through the stack for the given rows: hidden [rows, W, H],
  // positions int64 [rows, W], `window_mask` bool [W, W] or per row [rows, W, W]
  // (true: may attend) among the new tokens. K/V are written after each row's committed length. Returns
  // logits [rows, W, V] (float32).
  at::Tensor forward_hidden(const std::vector<int64_t>& rows, const at::Tensor& hidden, const at::Tensor& positions,
                            const at::Tensor& window_mask);

  KvCache& cache() { return cache_; }

 private:
  at::Tensor attention(int64_t layer, const std::vector<int64_t>& rows, const at::Tensor& h,
                       const at::Tensor& positions, const at::Tensor& window_mask);

  TransformerConfig config_;
  TransformerWeights weights_;
  KvCache cache_;
  std::vector<int64_t> next_position_;  // per row: position of the next root
  std::vector<uint8_t> pending_valid_;  // per row: key validity of the current root
  std::vector<at::Tensor> pending_root_embedding_;  // per row: input vector of a prompt-embedding root
};

}  // namespace sjd::model
