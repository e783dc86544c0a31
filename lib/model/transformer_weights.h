#pragma once
// The transformer's tensors, taken from a WeightMap by the checkpoint's key
// style and checked against the architecture numbers.
#include <ATen/ATen.h>

#include <vector>

#include "io/weights.h"
#include "model/transformer_config.h"

namespace sjd::model {

struct LayerWeights {
  at::Tensor attn_norm, q, k, v, o;      // projections as [out, in]
  at::Tensor q_norm_w, q_norm_b, k_norm_w, k_norm_b;  // [1 or heads, head_dim]; qk_norm only
  at::Tensor mlp_norm, gate, up, down;
};

struct TransformerWeights {
  at::Tensor embed;    // [V, H]
  std::vector<LayerWeights> layers;
  at::Tensor norm;     // [H]
  at::Tensor lm_head;  // [V, H]
};

// Every tensor converted to `dtype` and placed on `device` one by one (a bf16
// GPU model never exists as a float32 copy); a missing or mis-shaped tensor
// throws io::WeightError naming it, the expected and found shapes and the file.
TransformerWeights load_transformer_weights(const io::WeightMap& weights, const TransformerConfig& config,
                                            at::ScalarType dtype, at::Device device = at::Device(at::kCPU));

}  // namespace sjd::model
