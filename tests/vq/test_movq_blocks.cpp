// MoVQ's own blocks against direct formulas written with loops on small
// inputs: the causal 3D convolution (zero padding 2 frames in front, none
// behind; 1 on each side in H and W for 3x3 kernels), BatchNorm3d at
// inference, the temporal upsample, SpatialNorm and the SpatialNorm attention.
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "vq/movq_blocks.h"

using namespace sjd::vq;

namespace {

at::Tensor normal(at::IntArrayRef shape, uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, shape, generator);
}

double max_error(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a - b).abs().max().item<double>();
}

// y[o, t, h, w] = bias[o] + sum W[o, i, dt, dh, dw] * x[i, t + dt - 2, h + dh - ph, w + dw - pw], zero outside.
at::Tensor causal_conv3d_by_loops(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t in = x.size(1), frames = x.size(2), height = x.size(3), width = x.size(4);
  const int64_t out = weight.size(0), kt = weight.size(2), kh = weight.size(3), kw = weight.size(4);
  const int64_t ph = kh / 2, pw = kw / 2;  // ceil((k - 1) / 2): the front side takes the odd one
  at::Tensor y = at::empty({1, out, frames, height, width});
  auto X = x.accessor<float, 5>();
  auto W = weight.accessor<float, 5>();
  auto Y = y.accessor<float, 5>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w) {
          double sum = bias[o].item<float>();
          for (int64_t i = 0; i < in; ++i)
            for (int64_t dt = 0; dt < kt; ++dt)
              for (int64_t dh = 0; dh < kh; ++dh)
                for (int64_t dw = 0; dw < kw; ++dw) {
                  const int64_t st = t + dt - 2, sh = h + dh - ph, sw = w + dw - pw;
                  if (st < 0 || st >= frames || sh < 0 || sh >= height || sw < 0 || sw >= width) continue;
                  sum += W[o][i][dt][dh][dw] * X[0][i][st][sh][sw];
                }
          Y[0][o][t][h][w] = static_cast<float>(sum);
        }
  return y;
}

// GroupNorm(32 groups, eps 1e-6) written out: per group mean and biased variance.
at::Tensor group_norm_by_formula(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta) {
  const int64_t channels = x.size(1), per_group = channels / 32;
  at::Tensor y = at::empty_like(x);
  for (int64_t g = 0; g < 32; ++g) {
    const at::Tensor group = x.narrow(1, g * per_group, per_group);
    const double mean = group.mean().item<double>();
    const double var = ((group - mean) * (group - mean)).mean().item<double>();
    y.narrow(1, g * per_group, per_group).copy_((group - mean) / std::sqrt(var + 1e-6));
  }
  return y * gamma.view({1, -1, 1, 1}) + beta.view({1, -1, 1, 1});
}

// 1x1 convolution written out: out[o] = b[o] + sum_i W[o, i] x[i].
at::Tensor pointwise(const Conv2d& conv, const at::Tensor& x) {
  const at::Tensor w = conv.weight.view({conv.weight.size(0), conv.weight.size(1)});
  return at::einsum("oi,bihw->bohw", {w, x}) + conv.bias.view({1, -1, 1, 1});
}

// zq [1, C, h, w] -> [1, C, h * f, w * f]: each cell repeated f x f times.
at::Tensor repeat_cells(const at::Tensor& zq, int64_t factor) {
  return zq.repeat_interleave(factor, 2).repeat_interleave(factor, 3);
}

Conv2d random_conv(int64_t in, int64_t out, int64_t kernel, uint64_t seed) {
  return {normal({out, in, kernel, kernel}, seed) / std::sqrt(static_cast<double>(in * kernel * kernel)),
          normal({out}, seed + 1) * 0.1};
}

SpatialNorm random_spatial_norm(int64_t channels, int64_t zq_channels, uint64_t seed) {
  return {GroupNorm{1.0 + normal({channels}, seed) * 0.1, normal({channels}, seed + 1) * 0.1},
          random_conv(zq_channels, channels, 1, seed + 2), random_conv(zq_channels, channels, 1, seed + 4)};
}

}  // namespace

TEST_CASE("CausalConv3d matches the causal convolution formula", "[vq][movq]") {
  const at::Tensor x = normal({1, 2, 4, 3, 5}, 1);
  SECTION("3x3x3 (temporal blocks)") {
    const CausalConv3d conv{normal({3, 2, 3, 3, 3}, 2) * 0.3, normal({3}, 3)};
    CHECK(max_error(conv(x), causal_conv3d_by_loops(x, conv.weight, conv.bias)) < 1e-5);
  }
  SECTION("3x1x1 (post_quant_conv)") {
    const CausalConv3d conv{normal({3, 2, 3, 1, 1}, 4) * 0.3, normal({3}, 5)};
    CHECK(max_error(conv(x), causal_conv3d_by_loops(x, conv.weight, conv.bias)) < 1e-5);
  }
  SECTION("an output frame never depends on later input frames") {
    const CausalConv3d conv{normal({3, 2, 3, 3, 3}, 6) * 0.3, normal({3}, 7)};
    at::Tensor later = x.clone();
    later.narrow(2, 2, 2).normal_();
    CHECK(max_error(conv(x).narrow(2, 0, 2), conv(later).narrow(2, 0, 2)) == 0.0);
    CHECK(max_error(conv(x).narrow(2, 2, 1), conv(later).narrow(2, 2, 1)) > 1e-3);
  }
}

TEST_CASE("BatchNorm3d uses the running statistics with eps 1e-5", "[vq][movq]") {
  const BatchNorm3d norm{normal({3}, 1), normal({3}, 2), normal({3}, 3), normal({3}, 4).abs() + 0.5};
  const at::Tensor x = normal({2, 3, 2, 2, 2}, 5);
  const auto view = [](const at::Tensor& t) { return t.view({1, 3, 1, 1, 1}); };
  const at::Tensor expected =
      (x - view(norm.running_mean)) / at::sqrt(view(norm.running_var) + 1e-5) * view(norm.weight) + view(norm.bias);
  CHECK(max_error(norm(x), expected) < 1e-5);
}

TEST_CASE("TemporalUpsample repeats each frame, then convolves causally", "[vq][movq]") {
  const TemporalUpsample up{CausalConv3d{normal({2, 2, 3, 3, 3}, 1) * 0.3, normal({2}, 2)}};
  const at::Tensor x = normal({1, 2, 2, 3, 3}, 3);
  // Frames f0, f1 -> f0, f0, f1, f1.
  const at::Tensor repeated = at::stack({x.select(2, 0), x.select(2, 0), x.select(2, 1), x.select(2, 1)}, 2);
  const at::Tensor y = up(x);
  REQUIRE(y.size(2) == 4);
  CHECK(max_error(y, causal_conv3d_by_loops(repeated, up.conv.weight, up.conv.bias)) < 1e-5);
}

TEST_CASE("SpatialNorm is GroupNorm(x) * conv_y(zq) + conv_b(zq) with zq nearest-resized", "[vq][movq]") {
  const SpatialNorm norm = random_spatial_norm(64, 4, 10);
  const at::Tensor x = normal({1, 64, 4, 6}, 20);
  const at::Tensor zq = normal({1, 4, 2, 3}, 21);
  const at::Tensor up = repeat_cells(zq, 2);
  const at::Tensor expected = group_norm_by_formula(x, norm.norm_layer.weight, norm.norm_layer.bias) *
                                  pointwise(norm.conv_y, up) +
                              pointwise(norm.conv_b, up);
  CHECK(max_error(norm(x, zq), expected) < 1e-4);
  // At the zq's own size nothing is resized.
  const at::Tensor same = normal({1, 64, 2, 3}, 22);
  const at::Tensor expected_same = group_norm_by_formula(same, norm.norm_layer.weight, norm.norm_layer.bias) *
                                       pointwise(norm.conv_y, zq) +
                                   pointwise(norm.conv_b, zq);
  CHECK(max_error(norm(same, zq), expected_same) < 1e-4);
}

TEST_CASE("SpatialAttnBlock: x + proj_out(softmax(q k^T / sqrt(C)) v) on the SpatialNorm output", "[vq][movq]") {
  const int64_t channels = 32;
  const SpatialAttnBlock block{random_spatial_norm(channels, 4, 30), random_conv(channels, channels, 1, 40),
                               random_conv(channels, channels, 1, 42), random_conv(channels, channels, 1, 44),
                               random_conv(channels, channels, 1, 46)};
  const at::Tensor x = normal({1, channels, 2, 3}, 50);
  const at::Tensor zq = normal({1, 4, 1, 1}, 51);
  const at::Tensor h = block.norm(x, zq);
  const at::Tensor q = pointwise(block.q, h).view({channels, 6});
  const at::Tensor k = pointwise(block.k, h).view({channels, 6});
  const at::Tensor v = pointwise(block.v, h).view({channels, 6});
  at::Tensor attended = at::zeros({channels, 6});
  for (int64_t i = 0; i < 6; ++i) {
    std::vector<double> scores;
    double total = 0.0;
    for (int64_t j = 0; j < 6; ++j) {
      scores.push_back(std::exp((q.select(1, i) * k.select(1, j)).sum().item<double>() / std::sqrt(32.0)));
      total += scores.back();
    }
    for (int64_t j = 0; j < 6; ++j) attended.select(1, i).add_(v.select(1, j) * (scores[j] / total));
  }
  const at::Tensor expected = x + pointwise(block.proj_out, attended.view({1, channels, 2, 3}));
  CHECK(max_error(block(x, zq), expected) < 1e-4);
}
