#pragma once
// Inputs shared by the device-vs-CPU tests: seeded random probability rows,
// every relaxation, and the tolerance the pipeline test states.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "sampling/relaxation.h"

namespace sjd::cuda_testing {

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
