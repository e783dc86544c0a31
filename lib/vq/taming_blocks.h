#pragma once
// The building blocks of taming-transformers' conv decoder, shared by the VQ
// decoders that reuse them. Each block loads its tensors from a WeightMap
// under a key prefix (checking every shape) and runs in float32 on ATen.
#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "io/weights.h"

namespace sjd::vq {

// Tensor `name` checked against `shape`, as contiguous float32.
at::Tensor load_float(const io::WeightMap& weights, const std::string& name, at::IntArrayRef shape);

// Stride-1 convolution whose padding keeps the spatial size.
struct Conv2d {
  at::Tensor weight;  // [out, in, k, k]
  at::Tensor bias;    // [out]
  static Conv2d load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out,
                     int64_t kernel);
  at::Tensor operator()(const at::Tensor& x) const;
};

// GroupNorm(32 groups, eps 1e-6) with affine weight and bias.
struct GroupNorm {
  at::Tensor weight, bias;
  static GroupNorm load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// x + conv2(swish(norm2(conv1(swish(norm1(x)))))), the skip path projected by
// a 1x1 `nin_shortcut` when the channel count changes. (Dropout is a no-op at
// inference and the time-embedding input is unused by these decoders.)
struct ResnetBlock {
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  std::optional<Conv2d> nin_shortcut;
  static ResnetBlock load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out);
  at::Tensor operator()(const at::Tensor& x) const;
};

// Single-head self-attention over all positions: 1x1 q/k/v on the normalised
// input, softmax(q k^T / sqrt(C)) v, 1x1 proj_out, added to the input.
struct AttnBlock {
  GroupNorm norm;
  Conv2d q, k, v, proj_out;
  static AttnBlock load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// Nearest-neighbour x2 then a 3x3 convolution.
struct Upsample {
  Conv2d conv;
  static Upsample load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// x * sigmoid(x).
at::Tensor swish(const at::Tensor& x);

}  // namespace sjd::vq
