#include "device_cases.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sjd::cuda_testing {

at::Device device() {
  if (!at::hasCUDA()) throw std::runtime_error("tests_cuda needs a CUDA device");
  return at::Device(at::kCUDA, 0);
}

double scaled_error(const at::Tensor& expected, const at::Tensor& got) {
  const at::Tensor a = expected.to(at::kCPU, at::kDouble), b = got.to(at::kCPU, at::kDouble);
  return (a - b).abs().max().item<double>() / std::max(1.0, a.abs().max().item<double>());
}

double rounding_tolerance(at::ScalarType dtype, int units) {
  switch (dtype) {
    case at::kBFloat16: return units * 0.0078125;  // 2^-7
    case at::kHalf: return units * 0.0009765625;   // 2^-10
    default: return 1e-5;
  }
}

at::Tensor random_probs(int64_t rows, int64_t vocab, uint64_t seed, double zero_share) {
  at::Tensor logits = at::randn({rows, vocab}, at::make_generator<at::CPUGeneratorImpl>(seed)) * 2.5;
  const at::Tensor u = at::rand({rows, vocab}, at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x5bd1e995));
  logits.masked_fill_(u < zero_share, -INFINITY);
  return at::softmax(logits, 1).contiguous();
}

at::Tensor peaked_at(const at::Tensor& probs, const std::vector<int64_t>& token, double mass) {
  at::Tensor out = probs.clone();
  for (size_t r = 0; r < token.size() && static_cast<int64_t>(r) < out.size(0); ++r) {
    at::Tensor row = out[static_cast<int64_t>(r)];
    row.mul_(1.0 - mass);
    row[token[r]] += mass;
  }
  return out.contiguous();
}

std::vector<NamedRelaxation> all_relaxations(int64_t vocab) {
  const at::Tensor order = at::randperm(vocab, at::make_generator<at::CPUGeneratorImpl>(99));
  at::Tensor table = at::empty({vocab, 6}, at::kLong);
  for (int64_t j = 0; j < 6; ++j) table.select(1, j).copy_(order.roll(j + 1));
  std::vector<NamedRelaxation> out;
  sampling::Relaxation none;
  out.push_back({"none", none});
  sampling::Relaxation uniform;
  uniform.kind = sampling::RelaxKind::kUniform;
  uniform.delta = 1.4;
  out.push_back({"uniform", uniform});
  sampling::Relaxation cool;
  cool.kind = sampling::RelaxKind::kCool;
  cool.delta = 1.2;
  cool.nu = 0.5;
  out.push_back({"cool", cool});
  sampling::Relaxation lantern;
  lantern.kind = sampling::RelaxKind::kLantern;
  lantern.lantern_k = 5;
  lantern.lantern_lambda = 2.0;
  lantern.neighbours = table;
  out.push_back({"lantern", lantern});
  lantern.lantern_own_residual = true;
  out.push_back({"lantern-own-residual", lantern});
  return out;
}

}  // namespace sjd::cuda_testing
