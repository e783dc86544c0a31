#include "model/rope.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace sjd::model {
namespace {

// Angles [P, D/2] in float64 for positions first .. first + P - 1.
at::Tensor angles_1d(int64_t first, int64_t count, int64_t dim, double theta) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor inv_freq = at::pow(theta, -at::arange(0, dim, 2, f64) / static_cast<double>(dim));  // [D/2]
  return at::arange(first, first + count, f64).unsqueeze(1) * inv_freq.unsqueeze(0);
}

at::Tensor angles_2d(int64_t count, int64_t dim, double theta, int64_t grid_width) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor freq = at::pow(theta, -at::arange(0, dim / 4, f64) * 2.0 / (dim / 2.0));  // [D/4]
  const at::Tensor pos = at::arange(0, count, at::TensorOptions().dtype(at::kLong));
  const at::Tensor row = at::floor_divide(pos, grid_width).to(at::kDouble).unsqueeze(1);
  const at::Tensor col = at::remainder(pos, grid_width).to(at::kDouble).unsqueeze(1);
  return at::cat({row * freq, col * freq}, 1);  // [P, D/2]: row pairs first, then column pairs
}

}  // namespace

RopeTable::RopeTable(const TransformerConfig& config, int64_t max_position, at::ScalarType dtype, at::Device device)
    : two_d_(config.rope == RopeKind::k2d) {
  const int64_t dim = config.head_dim;
  const int64_t count = std::max<int64_t>(max_position, 0) + 1;
  at::Tensor cos, sin;  // [P + 1, D] in float64 for positions -1 .. max, laid out like the pairs they rotate
  if (two_d_) {
    if (config.grid_width <= 0) throw std::invalid_argument("2D RoPE needs the image grid width");
    const at::Tensor a = angles_2d(count, dim, config.rope_theta, config.grid_width);
    // Interleaved pairs (x_2k, x_2k+1): out_2k = x_2k c - x_2k+1 s, out_2k+1 = x_2k+1 c + x_2k s.
    // Row 0 stands for every negative position: caption slots get zeroed q/k (cos = sin = 0)
    // as LlamaGen's reference does.
    const at::Tensor none = at::zeros({1, dim}, a.options());
    cos = at::cat({none, at::stack({a.cos(), a.cos()}, -1).reshape({count, dim})});
    sin = at::cat({none, at::stack({-a.sin(), a.sin()}, -1).reshape({count, dim})});
  } else {
    // Halves (x_k, x_k+D/2): out_k = x_k c - x_k+D/2 s, out_k+D/2 = x_k+D/2 c + x_k s. Position -1
    // is a placeholder slot (Lumina's unconditional row), rotated like any other.
    const at::Tensor a = angles_1d(-1, count + 1, dim, config.rope_theta);
    cos = at::cat({a.cos(), a.cos()}, -1);
    sin = at::cat({-a.sin(), a.sin()}, -1);
  }
  cos_ = cos.to(device, dtype);
  signed_sin_ = sin.to(device, dtype);
}

RopeFactors RopeTable::gather(const at::Tensor& positions) const {
  // The caller keeps positions within max_position() (the transformer sizes the table at start).
  const at::Tensor index = (positions.clamp_min(-1) + 1).reshape({-1});
  std::vector<int64_t> shape(positions.sizes().begin(), positions.sizes().end());
  shape.push_back(1);
  shape.push_back(cos_.size(1));
  return {cos_.index_select(0, index).view(shape), signed_sin_.index_select(0, index).view(shape)};
}

at::Tensor RopeTable::apply(const at::Tensor& x, const RopeFactors& f) const {
  const int64_t dim = x.size(-1);
  std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end());
  pairs.back() = two_d_ ? dim / 2 : 2;
  pairs.push_back(two_d_ ? 2 : dim / 2);
  // partner(x): swap the two members of every rotation pair.
  const at::Tensor partner = x.reshape(pairs).flip(two_d_ ? -1 : -2).reshape(x.sizes());
  return x * f.cos + partner * f.signed_sin;
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const TransformerConfig& config) {
  const int64_t top = positions.numel() > 0 ? positions.max().item<int64_t>() : 0;
  const RopeTable table(config, top, x.scalar_type(), x.device());
  return table.apply(x, table.gather(positions));
}

}  // namespace sjd::model
