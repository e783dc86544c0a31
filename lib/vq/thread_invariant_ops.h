#pragma once
// The VQ decoders' ops whose ATen versions give other floats at other intra-op
// thread counts -- and so, near a rounding boundary, another PNG byte. With
// these the decode gives the same bytes on any thread count and can use every
// core it is given (docs/security.md). On a device other than the CPU, or a
// build of Torch without oneDNN, they are ATen's own ops.
#include <ATen/ATen.h>

namespace sjd::vq {

// GroupNorm. ATen's CPU kernel sums each group on one thread when x is
// channels-first, but splits a channels-last x (what oneDNN's convolutions
// return from mid-sized images) across threads; so x goes in channels-first.
at::Tensor group_norm(const at::Tensor& x, int64_t groups, const at::Tensor& weight, const at::Tensor& bias,
                      double eps);

// at::bmm: a [B, M, K] @ b [B, K, N] -> [B, M, N]. MKL's one-thread path sums
// a long K (the attention's probabilities times values, K = positions) in
// another order than its threaded one; oneDNN's convolution does not, so each
// product runs as a 1x1 convolution (b's columns as its filters).
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b);

// Stride-1 convolution (2-D or 3-D). ATen sends a 1x1 (or 3x1x1) kernel on one
// thread to its own matrix-product path and on more threads to oneDNN, whose
// sums are split otherwise; this always takes oneDNN where the build has it.
at::Tensor convolution(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::IntArrayRef padding);

}  // namespace sjd::vq
