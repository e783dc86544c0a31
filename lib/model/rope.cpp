#include "model/rope.h"

namespace sjd::model {
namespace {

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

at::Tensor rope_1d(const at::Tensor& x, const at::Tensor& positions, double theta) {
  const int64_t dim = x.size(-1);
  const at::Tensor inv_freq =
      at::pow(theta, -at::arange(0, dim, 2, positions.options().dtype(at::kDouble)) / static_cast<double>(dim));  // [D/2]
  const at::Tensor angles = positions.to(at::kDouble).unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, D/2]
  const at::Tensor full = at::cat({angles, angles}, -1).unsqueeze(1);                     // [T, 1, D]
  const at::Tensor cos = full.cos().to(x.scalar_type());
  const at::Tensor sin = full.sin().to(x.scalar_type());
  return x * cos + rotate_half(x) * sin;
}

at::Tensor rope_2d(const at::Tensor& x, const at::Tensor& positions, double theta, int64_t grid_width) {
  const int64_t dim = x.size(-1);
  const int64_t quarter = dim / 4;  // pairs per axis
  const at::Tensor freq =
      at::pow(theta, -at::arange(0, quarter, positions.options().dtype(at::kDouble)) * 2.0 / (dim / 2.0));  // [D/4]
  const at::Tensor pos = positions.to(at::kLong);
  const at::Tensor valid = (pos >= 0).to(at::kDouble).unsqueeze(1);                // [T, 1]
  const at::Tensor safe = pos.clamp_min(0);
  const at::Tensor row = at::floor_divide(safe, grid_width).to(at::kDouble).unsqueeze(1);
  const at::Tensor col = at::remainder(safe, grid_width).to(at::kDouble).unsqueeze(1);
  const at::Tensor angles = at::cat({row * freq, col * freq}, 1);                  // [T, D/2]
  const at::Tensor cos = (angles.cos() * valid).unsqueeze(1).to(x.scalar_type());  // [T, 1, D/2]
  const at::Tensor sin = (angles.sin() * valid).unsqueeze(1).to(x.scalar_type());
  const at::Tensor pairs = x.reshape({x.size(0), x.size(1), dim / 2, 2});
  const at::Tensor a = pairs.select(-1, 0);
  const at::Tensor b = pairs.select(-1, 1);
  return at::stack({a * cos - b * sin, a * sin + b * cos}, -1).reshape(x.sizes());
}

}  // namespace

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const TransformerConfig& config) {
  if (config.rope == RopeKind::k2d) return rope_2d(x, positions, config.rope_theta, config.grid_width);
  return rope_1d(x, positions, config.rope_theta);
}

}  // namespace sjd::model
