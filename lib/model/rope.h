#pragma once
// Rotary position embeddings.
//   1D rotate-half (HF layout): pairs (x_k, x_{k+D/2}) rotate by pos * theta^(-2k/D).
//   2D interleaved (LlamaGen): pairs (x_{2k}, x_{2k+1}); the first half of the
//   pairs rotate by the token's grid row, the second half by its column, with
//   frequencies theta^(-2k/(D/2)); positions < 0 (caption slots) get cos = sin = 0.
#include <ATen/ATen.h>

#include "model/transformer_config.h"

namespace sjd::model {

// x: [tokens, heads, head_dim]; positions: int64 [tokens]. For 2D, a position p
// >= 0 is an image-token index (row = p / grid_width, col = p % grid_width).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const TransformerConfig& config);

}  // namespace sjd::model
