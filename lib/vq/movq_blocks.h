#pragma once
// The blocks of Emu3's MoVQ decoder (BAAI Emu3-VisionTokenizer) that
// taming-transformers does not have: causal 3D convolutions and the temporal
// stack that runs over frames, and the spatially conditioned norm (SpatialNorm)
// that every 2D block uses in place of GroupNorm. Each loads its tensors under
// a key prefix of the release's checkpoint, checking every shape.
#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "io/weights.h"
#include "vq/taming_blocks.h"

namespace sjd::vq {

// Conv3d over [B, C, T, H, W] that never looks ahead in time: the input is
// zero-padded by 2 frames in front (Emu3 pads 2 whatever the kernel) and none
// behind, and by (k - 1) / 2 on each side in H and W (the front side taking the
// odd one out). Tensors `{prefix}.conv.weight [out, in, kt, kh, kw]` and `.bias`.
struct CausalConv3d {
  at::Tensor weight, bias;
  static CausalConv3d load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out,
                           int64_t kt, int64_t kh, int64_t kw);
  at::Tensor operator()(const at::Tensor& x) const;
};

// BatchNorm3d at inference: (x - running_mean) / sqrt(running_var + 1e-5) * weight + bias.
struct BatchNorm3d {
  at::Tensor weight, bias, running_mean, running_var;
  static BatchNorm3d load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// x + conv2(swish(norm2(conv1(swish(norm1(x)))))) with BatchNorm3d and causal
// 3x3x3 convolutions; Emu3's decoder keeps the channel count (no shortcut conv).
struct TemporalResnetBlock {
  BatchNorm3d norm1, norm2;
  CausalConv3d conv1, conv2;
  static TemporalResnetBlock load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// Every frame repeated twice (nearest x2 in time), then a causal 3x3x3 conv.
struct TemporalUpsample {
  CausalConv3d conv;
  static TemporalUpsample load(const io::WeightMap& weights, const std::string& prefix, int64_t channels);
  at::Tensor operator()(const at::Tensor& x) const;
};

// GroupNorm(32, eps 1e-6)(x) * conv_y(zq) + conv_b(zq), zq [B, zq_channels, h, w]
// nearest-resized to x's size first; conv_y and conv_b are 1x1.
// Tensors `{prefix}.norm_layer`, `.conv_y`, `.conv_b`.
struct SpatialNorm {
  GroupNorm norm_layer;
  Conv2d conv_y, conv_b;
  static SpatialNorm load(const io::WeightMap& weights, const std::string& prefix, int64_t channels,
                          int64_t zq_channels);
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& zq) const;
};

// Taming's ResnetBlock with both norms SpatialNorms.
struct SpatialResnetBlock {
  SpatialNorm norm1, norm2;
  Conv2d conv1, conv2;
  std::optional<Conv2d> nin_shortcut;
  static SpatialResnetBlock load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out,
                                 int64_t zq_channels);
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& zq) const;
};

// Taming's single-head AttnBlock (1x1 q/k/v/proj_out, scale 1/sqrt(C)) with a SpatialNorm.
struct SpatialAttnBlock {
  SpatialNorm norm;
  Conv2d q, k, v, proj_out;
  static SpatialAttnBlock load(const io::WeightMap& weights, const std::string& prefix, int64_t channels,
                               int64_t zq_channels);
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& zq) const;
};

}  // namespace sjd::vq
