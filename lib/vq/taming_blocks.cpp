#include "vq/taming_blocks.h"

#include "vq/thread_invariant_ops.h"

#include <cmath>

namespace sjd::vq {
namespace {
constexpr int64_t kGroups = 32;
constexpr double kNormEps = 1e-6;
}  // namespace

at::Tensor load_float(const io::WeightMap& weights, const std::string& name, at::IntArrayRef shape) {
  // Checkpoints may be bf16/fp16; the decoder computes in float32. An integer or boolean tensor where a weight
  // belongs is not a weight of this decoder, whatever its values would give once cast.
  const at::Tensor& tensor = weights.get(name, shape);
  if (!at::isFloatingType(tensor.scalar_type())) {
    throw io::WeightError("tensor '" + name + "' in " + weights.source_of(name) + " has dtype " +
                          std::string(c10::toString(tensor.scalar_type())) +
                          "; VQ decoder weights must be floating point");
  }
  return tensor.to(at::kFloat).contiguous();
}

at::Tensor swish(const at::Tensor& x) { return x * at::sigmoid(x); }

Conv2d Conv2d::load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out,
                    int64_t kernel) {
  return {load_float(weights, prefix + ".weight", {out, in, kernel, kernel}),
          load_float(weights, prefix + ".bias", {out})};
}

at::Tensor Conv2d::operator()(const at::Tensor& x) const {
  const int64_t pad = weight.size(2) / 2;
  return convolution(x, weight, bias, /*padding=*/{pad, pad});
}

GroupNorm GroupNorm::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels) {
  return {load_float(weights, prefix + ".weight", {channels}), load_float(weights, prefix + ".bias", {channels})};
}

at::Tensor GroupNorm::operator()(const at::Tensor& x) const {
  return group_norm(x, kGroups, weight, bias, kNormEps);
}

ResnetBlock ResnetBlock::load(const io::WeightMap& weights, const std::string& prefix, int64_t in, int64_t out) {
  ResnetBlock b{GroupNorm::load(weights, prefix + ".norm1", in), GroupNorm::load(weights, prefix + ".norm2", out),
                Conv2d::load(weights, prefix + ".conv1", in, out, 3),
                Conv2d::load(weights, prefix + ".conv2", out, out, 3), std::nullopt};
  if (in != out) b.nin_shortcut = Conv2d::load(weights, prefix + ".nin_shortcut", in, out, 1);
  return b;
}

at::Tensor ResnetBlock::operator()(const at::Tensor& x) const {
  at::Tensor h = conv1(swish(norm1(x)));
  h = conv2(swish(norm2(h)));
  return (nin_shortcut ? (*nin_shortcut)(x) : x) + h;
}

AttnBlock AttnBlock::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels) {
  return {GroupNorm::load(weights, prefix + ".norm", channels),
          Conv2d::load(weights, prefix + ".q", channels, channels, 1),
          Conv2d::load(weights, prefix + ".k", channels, channels, 1),
          Conv2d::load(weights, prefix + ".v", channels, channels, 1),
          Conv2d::load(weights, prefix + ".proj_out", channels, channels, 1)};
}

at::Tensor AttnBlock::operator()(const at::Tensor& x) const {
  const int64_t batch = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
  const at::Tensor h = norm(x);
  // [B, C, H, W] -> [B, HW, C]: one row per position.
  auto rows = [&](const at::Tensor& t) { return t.reshape({batch, channels, height * width}).transpose(1, 2); };
  const at::Tensor query = rows(q(h)), key = rows(k(h)), value = rows(v(h));
  const at::Tensor scores = batched_matmul(query, key.transpose(1, 2)) / std::sqrt(static_cast<double>(channels));
  const at::Tensor attended = batched_matmul(at::softmax(scores, /*dim=*/-1), value);  // [B, HW, C]
  return x + proj_out(attended.transpose(1, 2).reshape({batch, channels, height, width}));
}

Upsample Upsample::load(const io::WeightMap& weights, const std::string& prefix, int64_t channels) {
  return {Conv2d::load(weights, prefix + ".conv", channels, channels, 3)};
}

at::Tensor Upsample::operator()(const at::Tensor& x) const {
  return conv(at::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2}));
}

}  // namespace sjd::vq
