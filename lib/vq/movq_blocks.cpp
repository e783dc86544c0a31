#include "vq/movq_blocks.h"

#include "vq/thread_invariant_ops.h"

#include <cmath>

namespace sjd::vq {
namespace {
constexpr int64_t kCausalTimePad = 2;
constexpr double kBatchNormEps = 1e-5;  // torch.nn.BatchNorm3d's default, which Emu3 keeps
}  // namespace

CausalConv3d CausalConv3d::load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out,
                                int64_t kt, int64_t kh, int64_t kw) {
  return {load_float(weights, prefix + ".conv.weight", {out, in, kt, kh, kw}),
          load_float(weights, prefix + ".conv.bias", {out})};
}

at::Tensor CausalConv3d::operator()(const at::Tensor& x) const {
  const int64_t pad_h = weight.size(3) - 1, pad_w = weight.size(4) - 1;
  // constant_pad_nd takes (W front, W back, H front, H back, T front, T back).
  const at::Tensor padded = at::constant_pad_nd(
      x, {pad_w - pad_w / 2, pad_w / 2, pad_h - pad_h / 2, pad_h / 2, kCausalTimePad, 0}, 0.0);
  return convolution(padded, weight, bias, /*padding=*/{0, 0, 0});
}

BatchNorm3d BatchNorm3d::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels) {
  return {load_float(weights, prefix + ".weight", {channels}), load_float(weights, prefix + ".bias", {channels}),
          load_float(weights, prefix + ".running_mean", {channels}),
          load_float(weights, prefix + ".running_var", {channels})};
}

at::Tensor BatchNorm3d::operator()(const at::Tensor& x) const {
  return at::batch_norm(x, weight, bias, running_mean, running_var, /*training=*/false, /*momentum=*/0.0,
                        kBatchNormEps, /*cudnn_enabled=*/false);
}

TemporalResnetBlock TemporalResnetBlock::load(const io::WeightMap& weights, const std::string& prefix,
                                              int64_t channels) {
  return {BatchNorm3d::load(weights, prefix + ".norm1", channels),
          BatchNorm3d::load(weights, prefix + ".norm2", channels),
          CausalConv3d::load(weights, prefix + ".conv1", channels, channels, 3, 3, 3),
          CausalConv3d::load(weights, prefix + ".conv2", channels, channels, 3, 3, 3)};
}

at::Tensor TemporalResnetBlock::operator()(const at::Tensor& x) const {
  const at::Tensor h = conv1(swish(norm1(x)));
  return x + conv2(swish(norm2(h)));
}

TemporalUpsample TemporalUpsample::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels) {
  return {CausalConv3d::load(weights, prefix + ".conv", channels, channels, 3, 3, 3)};
}

at::Tensor TemporalUpsample::operator()(const at::Tensor& x) const {
  return conv(x.repeat_interleave(2, /*dim=*/2));
}

SpatialNorm SpatialNorm::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels,
                              int64_t zq_channels) {
  return {GroupNorm::load(weights, prefix + ".norm_layer", channels),
          Conv2d::load(weights, prefix + ".conv_y", zq_channels, channels, 1),
          Conv2d::load(weights, prefix + ".conv_b", zq_channels, channels, 1)};
}

at::Tensor SpatialNorm::operator()(const at::Tensor& x, const at::Tensor& zq) const {
  const bool same_size = zq.size(2) == x.size(2) && zq.size(3) == x.size(3);
  const at::Tensor resized = same_size ? zq : at::upsample_nearest2d(zq, {x.size(2), x.size(3)});
  return norm_layer(x) * conv_y(resized) + conv_b(resized);
}

SpatialResnetBlock SpatialResnetBlock::load(const io::WeightMap& weights, const std::string& prefix, int64_t in,
                                            int64_t out, int64_t zq_channels) {
  SpatialResnetBlock b{SpatialNorm::load(weights, prefix + ".norm1", in, zq_channels),
                       SpatialNorm::load(weights, prefix + ".norm2", out, zq_channels),
                       Conv2d::load(weights, prefix + ".conv1", in, out, 3),
                       Conv2d::load(weights, prefix + ".conv2", out, out, 3), std::nullopt};
  if (in != out) b.nin_shortcut = Conv2d::load(weights, prefix + ".nin_shortcut", in, out, 1);
  return b;
}

at::Tensor SpatialResnetBlock::operator()(const at::Tensor& x, const at::Tensor& zq) const {
  at::Tensor h = conv1(swish(norm1(x, zq)));
  h = conv2(swish(norm2(h, zq)));
  return (nin_shortcut ? (*nin_shortcut)(x) : x) + h;
}

SpatialAttnBlock SpatialAttnBlock::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels,
                                        int64_t zq_channels) {
  return {SpatialNorm::load(weights, prefix + ".norm", channels, zq_channels),
          Conv2d::load(weights, prefix + ".q", channels, channels, 1),
          Conv2d::load(weights, prefix + ".k", channels, channels, 1),
          Conv2d::load(weights, prefix + ".v", channels, channels, 1),
          Conv2d::load(weights, prefix + ".proj_out", channels, channels, 1)};
}

at::Tensor SpatialAttnBlock::operator()(const at::Tensor& x, const at::Tensor& zq) const {
  const int64_t batch = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
  const at::Tensor h = norm(x, zq);
  // [B, C, H, W] -> [B, HW, C]: one row per position.
  auto rows = [&](const at::Tensor& t) { return t.reshape({batch, channels, height * width}).transpose(1, 2); };
  const at::Tensor query = rows(q(h)), key = rows(k(h)), value = rows(v(h));
  const at::Tensor scores = batched_matmul(query, key.transpose(1, 2)) / std::sqrt(static_cast<double>(channels));
  const at::Tensor attended = batched_matmul(at::softmax(scores, /*dim=*/-1), value);  // [B, HW, C]
  return x + proj_out(attended.transpose(1, 2).reshape({batch, channels, height, width}));
}

}  // namespace sjd::vq
