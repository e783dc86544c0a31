#pragma once
// Rotary position embeddings.
//   1D rotate-half (HF layout): pairs (x_k, x_{k+D/2}) rotate by pos * theta^(-2k/D).
//   2D interleaved (LlamaGen): pairs (x_{2k}, x_{2k+1}); the first half of the
//   pairs rotate by the token's grid row, the second half by its column, with
//   frequencies theta^(-2k/(D/2)); positions < 0 (caption slots) get cos = sin = 0.
// Both are written as x * cos + partner(x) * signed_sin, where partner swaps each
// rotation pair and signed_sin carries the minus sign: one code path, and the
// cos/sin of every position are computed once per image (in float64, as the
// reference does, then rounded to the model's dtype).
#include <ATen/ATen.h>

#include "model/transformer_config.h"

namespace sjd::model {

// cos and signed sin for a set of positions, shaped to broadcast over heads.
struct RopeFactors {
  at::Tensor cos;         // [..., 1, D]
  at::Tensor signed_sin;  // [..., 1, D]
};

class RopeTable {
 public:
  RopeTable() = default;
  // Covers positions -1 .. max_position (for 2D: image-token indices; any
  // negative position is a caption slot and gets cos = sin = 0).
  RopeTable(const TransformerConfig& config, int64_t max_position, at::ScalarType dtype, at::Device device);

  int64_t max_position() const { return cos_.defined() ? cos_.size(0) - 2 : -1; }
  // Factors for int64 positions of any shape [...] -> [..., 1, D].
  RopeFactors gather(const at::Tensor& positions) const;
  // x: [..., heads, D] with factors from gather() over the leading dims.
  at::Tensor apply(const at::Tensor& x, const RopeFactors& factors) const;

 private:
  bool two_d_ = false;
  at::Tensor cos_, signed_sin_;  // [max_position + 2, D]; row 0 is position -1 (2D: every negative one)
};

// One-off convenience for tests: x [tokens, heads, D], positions int64 [tokens].
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const TransformerConfig& config);

}  // namespace sjd::model
