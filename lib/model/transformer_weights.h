#pragma once
// The transformer's tensors, taken from a WeightMap by the checkpoint's key
// style, checked against the architecture numbers, and fused for the forward:
// q/k/v become one projection and gate/up another, so each is one matmul per
// step over every row and window slot.
#include <ATen/ATen.h>

#include <vector>

#include "io/weights.h"
#include "model/transformer_config.h"

namespace sjd::model {

// One layer as checkpoints store it (projections as [out, in]).
struct CheckpointLayer {
  at::Tensor attn_norm, q, k, v, o;
  at::Tensor q_norm_w, q_norm_b, k_norm_w, k_norm_b;  // [1 or heads, head_dim]; qk_norm only
  at::Tensor mlp_norm, gate, up, down;
};

// One layer as the forward uses it.
struct LayerWeights {
  at::Tensor attn_norm;     // [H]
  at::Tensor qkv;           // [(heads + 2 kv_heads) * D, H]: q rows, then k, then v
  at::Tensor o;             // [H, heads * D]
  at::Tensor qk_norm_w;     // [heads + kv_heads, D]: q's LayerNorm per head, then k's (qk_norm only)
  at::Tensor qk_norm_b;
  at::Tensor mlp_norm;      // [H]
  at::Tensor gate_up;       // [2 I, H]: gate rows, then up
  at::Tensor down;          // [H, I]
};

struct TransformerWeights {
  at::Tensor embed;    // [V, H]
  std::vector<LayerWeights> layers;
  at::Tensor norm;     // [H]
  at::Tensor lm_head;  // [V, H]
};

// Concatenates a checkpoint layer's projections (and broadcasts Chameleon's
// [1, D] qk-norm tensors over heads), then converts to `dtype` on `device`.
LayerWeights fuse_layer(CheckpointLayer layer, const TransformerConfig& config, at::ScalarType dtype,
                        at::Device device);

// Every tensor converted to `dtype` and placed on `device` layer by layer (a bf16
// GPU model never exists as a float32 copy); a missing or mis-shaped tensor
// throws io::WeightError naming it, the expected and found shapes and the file.
TransformerWeights load_transformer_weights(const io::WeightMap& weights, const TransformerConfig& config,
                                            at::ScalarType dtype, at::Device device = at::Device(at::kCPU));

}  // namespace sjd::model
