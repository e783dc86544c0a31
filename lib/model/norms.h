// The transformer's normalisations, in two formulations of the same arithmetic.
// The explicit ones spell the float32 formula out op by op: the CPU runs them (its
// golden tokens were recorded with them). The fused ones are ATen's single-kernel
// norms: on a GPU every elementwise op is a kernel launch of its own, and at a batch
// of one CFG pair the ten or so small kernels of an explicit norm cost more than the
// layer's matmuls (docs/gpu.md). `rms_norm` and `head_layer_norm` pick by device.
#pragma once

#include <ATen/ATen.h>

namespace sjd::model {

// x / rms(x) * weight over the last dimension, computed in float32, in x's dtype.
at::Tensor rms_norm_explicit(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor rms_norm_fused(const at::Tensor& x, const at::Tensor& weight, double eps);

// Chameleon's qk-norm: LayerNorm over head_dim per head; weight and bias [heads, D].
// The fused form rounds the normalised values to x's dtype before the per-head affine
// step (a no-op in float32). In bf16 both fused forms may round otherwise than the
// explicit ones: their equality is tested in float32 here, the GPU's bf16 against the
// CPU by tests/cuda within its bf16 tolerance.
at::Tensor head_layer_norm_explicit(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps);
at::Tensor head_layer_norm_fused(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps);

inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x.is_cpu() ? rms_norm_explicit(x, weight, eps) : rms_norm_fused(x, weight, eps);
}

inline at::Tensor head_layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return x.is_cpu() ? head_layer_norm_explicit(x, w, b, eps) : head_layer_norm_fused(x, w, b, eps);
}

}  // namespace sjd::model
