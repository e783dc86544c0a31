#pragma once
// at::Tensor front ends of the layer's fused CUDA kernels (kernels/layer_kernels.h):
// the residual add with the next RMS norm, SwiGLU's silu(gate) * up, and the
// attention prologue (qk-norm, RoPE, q in attention's layout, K/V into the cache)
// in one kernel each. The transformer uses them on a GPU unless
// SJD_FUSED_LAYER_OPS=0; each has the ATen composition it replaces as its
// reference (tests/cuda/test_layer_ops_cuda.cpp). In a build without CUDA they
// are declared but refuse to run, and fused_layer_ops_built() says so.
#include <ATen/ATen.h>

#include <utility>

#include "model/kv_cache.h"
#include "model/rope.h"

namespace sjd::model {

bool fused_layer_ops_built();

// (x + delta, rms_norm(x + delta) * weight) over the last dimension; delta undefined: (x, rms_norm(x)).
// x, delta and weight of one floating dtype, contiguous, on one CUDA device.
std::pair<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& delta,
                                                     const at::Tensor& weight, double eps);

// gate_up [..., 2 inner] (contiguous) -> silu(gate) * up [..., inner].
at::Tensor fused_silu_mul(const at::Tensor& gate_up);

// The attention prologue of one layer for qkv [rows, W, heads + 2 kv_heads, D] (contiguous):
// q and k heads normalised by Chameleon's qk-norm when norm_weight is defined ([heads + kv_heads, D],
// with norm_bias) and rotated by `rope` (RopeTable::gather of the step's [rows, W] positions);
// K and V written to `layer` of `cache` at `slots`. Returns q [rows, heads, W, D], a transposed view of
// [rows, W, heads, D] memory: cuDNN's attention writes its output in q's layout, so the output
// projection then reads it as [rows, W, heads x D] without a copy (a copy per layer otherwise, 3 us
// each at an L = 64 step of Lumina 7B on an H200, 6 us at a 145-node tree).
struct QkvPrologue {
  int64_t heads = 0, kv_heads = 0;
  at::Tensor norm_weight, norm_bias;
  double norm_eps = 1e-5;
  bool rope_2d = false;
};
at::Tensor fused_qkv_prologue(const at::Tensor& qkv, const QkvPrologue& how, const RopeFactors& rope,
                              KvCache& cache, int64_t layer, const KvCache::StepSlots& slots);

}  // namespace sjd::model
