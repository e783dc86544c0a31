// The fused norms a GPU runs compute what the explicit float32 formulas of the CPU compute
// (model/norms.h). Both formulations are plain ATen, so they are compared here on the CPU;
// tests/cuda compares the whole device transformer with the CPU's.
#include <catch2/catch.hpp>

#include "model/norms.h"

using namespace sjd::model;

namespace {

// Largest |a - b| relative to the largest |b|.
double relative_gap(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         b.to(at::kDouble).abs().max().item<double>();
}

}  // namespace

TEST_CASE("fused RMS norm equals the explicit float32 formula", "[model][norms]") {
  at::manual_seed(7);
  // Small activations, so that eps is not negligible against the mean square.
  const at::Tensor x = at::randn({2, 5, 64}) * 3e-3;
  const at::Tensor weight = at::randn({64});
  const double eps = 1e-5;
  const at::Tensor explicit_form = rms_norm_explicit(x, weight, eps);
  CHECK(relative_gap(rms_norm_fused(x, weight, eps), explicit_form) < 1e-5);
  // The tolerance tells an eps mistake apart.
  CHECK(relative_gap(rms_norm_fused(x, weight, eps * 10), explicit_form) > 1e-3);
  // The dispatching form takes the explicit one on the CPU, bit for bit.
  CHECK(at::equal(rms_norm(x, weight, eps), explicit_form));
}

TEST_CASE("fused per-head layer norm equals the explicit float32 formula", "[model][norms]") {
  at::manual_seed(11);
  const int64_t heads = 6, dim = 32;
  // [rows, W, heads, D], non-contiguous as the narrowed q/k heads of a fused qkv projection are.
  const at::Tensor qkv = at::randn({2, 4, heads + 3, dim}) * 2.0 + 0.5;
  const at::Tensor x = qkv.narrow(2, 0, heads);
  const at::Tensor w = at::randn({heads, dim});
  const at::Tensor b = at::randn({heads, dim});
  const double eps = 1e-5;
  const at::Tensor explicit_form = head_layer_norm_explicit(x, w, b, eps);
  CHECK(relative_gap(head_layer_norm_fused(x, w, b, eps), explicit_form) < 1e-5);
  // Each head has its own weight and bias: swapping two heads' weights is caught.
  const at::Tensor swapped = at::cat({w.narrow(0, 1, 1), w.narrow(0, 0, 1), w.narrow(0, 2, heads - 2)});
  CHECK(relative_gap(head_layer_norm_fused(x, swapped, b, eps), explicit_form) > 1e-2);
  CHECK(at::equal(head_layer_norm(x, w, b, eps), explicit_form));
}
