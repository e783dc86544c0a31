#pragma once
// Inputs shared by the device-vs-CPU tests: seeded random probability rows,
// every relaxation, and the tolerance the pipeline test states.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "sampling/relaxation.h"

namespace sjd::cuda_testing {

// max |expected - got| over max(1, max |expected|), in float64 on the CPU.
double scaled_error(const at::Tensor& expected, const at::Tensor& got);

// `units` units in the last place of a value of scale 1 in `dtype` (bfloat16 2^-7, float16 2^-10);
// float32: 1e-5, whatever `units` (sums in another order, not one rounding).
double rounding_tolerance(at::ScalarType dtype, int units);

// The device the tests run on; fails the test (not skips) when CUDA is absent,
// since these tests are only built for CUDA builds.
at::Device device();

// [rows, vocab] float32 probabilities on the CPU: softmax of scaled normal
// logits with a share of exact zeros, so residuals and races meet zero mass.
at::Tensor random_probs(int64_t rows, int64_t vocab, uint64_t seed, double zero_share = 0.3);

// Moves `mass` of row r onto token[r] (renormalised), so drafts get accepted often.
at::Tensor peaked_at(const at::Tensor& probs, const std::vector<int64_t>& token, double mass);

// none, uniform, cool, lantern and lantern with its own residual, with a
// [vocab, 6] neighbour table for the LANTERN ones.
struct NamedRelaxation {
  std::string name;
  sampling::Relaxation relax;
};
std::vector<NamedRelaxation> all_relaxations(int64_t vocab);

}  // namespace sjd::cuda_testing
