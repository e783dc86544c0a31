// A stand-in for the VQ decoders in `sjd bench`: a taming-style conv decoder
// (conv_in, mid res/attention/res, residual levels with nearest x2 upsampling,
// norm, conv_out) of the preset's channel plan with random float32 weights, so
// the image-decode share of seconds per image is measured at the right size.
// The production decoders (lib/vq) need checkpoint tensors by name and add
// details (MoVQ's spatial norms and temporal stack) this leaves out.
#include "engine/bench_setup.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace sjd::engine {

VqStandIn::VqStandIn(const VqPlan& plan, at::Device device, uint64_t seed)
    : plan_(plan), device_(device), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  const int64_t top = plan.channels.front();
  conv(plan.z_channels, top, 3);  // conv_in
  for (int b = 0; b < 2; ++b) {   // mid: res, attention, res
    conv(top, top, 3);
    conv(top, top, 3);
    if (b == 0) {
      for (int j = 0; j < 4; ++j) conv(top, top, 1);
    }
  }
  int64_t in = top;
  for (size_t level = 0; level < plan.channels.size(); ++level) {
    const int64_t out = plan.channels[level];
    for (int64_t b = 0; b < plan.res_blocks; ++b) {
      conv(in, out, 3);
      conv(out, out, 3);
      if (in != out) conv(in, out, 1);  // nin_shortcut
      in = out;
      if (level == 0 && plan.top_attention) {
        for (int j = 0; j < 4; ++j) conv(out, out, 1);
      }
    }
    if (level + 1 < plan.channels.size()) conv(out, out, 3);  // upsample conv
  }
  conv(in, 3, 3);  // conv_out
}

VqStandIn::Conv VqStandIn::conv(int64_t in, int64_t out, int64_t kernel) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(in * kernel * kernel));
  Conv c{(at::normal(0.0, 1.0, {out, in, kernel, kernel}, generator_) * scale).to(device_),
         at::zeros({out}, at::TensorOptions().device(device_))};
  convs_.push_back(c);
  return c;
}

at::Tensor VqStandIn::res_block(const at::Tensor& x, size_t& next) const {
  const Conv& a = convs_[next++];
  const Conv& b = convs_[next++];
  const int64_t padding_a = a.weight.size(-1) / 2, padding_b = b.weight.size(-1) / 2;
  at::Tensor h = at::silu(at::group_norm(x, 32, {}, {}, 1e-6));
  h = at::conv2d(h, a.weight, a.bias, 1, padding_a);
  h = at::silu(at::group_norm(h, 32, {}, {}, 1e-6));
  h = at::conv2d(h, b.weight, b.bias, 1, padding_b);
  if (x.size(1) != h.size(1)) {
    const Conv& shortcut = convs_[next++];
    return at::conv2d(x, shortcut.weight, shortcut.bias) + h;
  }
  return x + h;
}

at::Tensor VqStandIn::attention(const at::Tensor& x, size_t& next) const {
  const int64_t channels = x.size(1);
  const at::Tensor h = at::group_norm(x, 32, {}, {}, 1e-6);
  const Conv& q = convs_[next++];
  const Conv& k = convs_[next++];
  const Conv& v = convs_[next++];
  const Conv& proj = convs_[next++];
  const auto flat = [&](const Conv& c) { return at::conv2d(h, c.weight, c.bias).flatten(2); };  // [1, C, N]
  const at::Tensor weights =
      at::softmax(at::bmm(flat(q).transpose(1, 2), flat(k)) / std::sqrt(static_cast<double>(channels)), -1);
  const at::Tensor attended = at::bmm(flat(v), weights.transpose(1, 2)).view(x.sizes());
  return x + at::conv2d(attended, proj.weight, proj.bias);
}

at::Tensor VqStandIn::decode(int64_t grid) const {
  size_t next = 0;
  at::Tensor x = at::randn({1, plan_.z_channels, grid, grid}, at::TensorOptions().device(device_));
  const Conv& conv_in = convs_[next++];
  x = at::conv2d(x, conv_in.weight, conv_in.bias, 1, 1);
  x = res_block(x, next);
  x = attention(x, next);
  x = res_block(x, next);
  for (size_t level = 0; level < plan_.channels.size(); ++level) {
    for (int64_t b = 0; b < plan_.res_blocks; ++b) {
      x = res_block(x, next);
      if (level == 0 && plan_.top_attention) x = attention(x, next);
    }
    if (level + 1 < plan_.channels.size()) {
      const Conv& up = convs_[next++];
      x = at::conv2d(at::upsample_nearest2d(x, at::IntArrayRef{x.size(2) * 2, x.size(3) * 2}),
                     up.weight, up.bias, 1, 1);
    }
  }
  x = at::silu(at::group_norm(x, 32, {}, {}, 1e-6));
  const Conv& conv_out = convs_[next++];
  return at::conv2d(x, conv_out.weight, conv_out.bias, 1, 1);
}

}  // namespace sjd::engine
