#include "sampling/tensor_draws.h"

#include <stdexcept>

#include "sampling/categorical.h"

#ifdef SJD_WITH_CUDA
#include "sampling/cuda_ops.h"
#endif

namespace sjd::sampling {

int64_t sample_from(const at::Tensor& q, const RngKey& key) {
  // A device q is read back for this draw: initial drafts from a stale p are a few rows per
  // step (sample-left/up only), far less than the window's probabilities.
  const at::Tensor host = q.is_cpu() ? q.contiguous() : q.to(at::kCPU).contiguous();
  return sample_token(host.data_ptr<float>(), host.numel(), key);
}

std::vector<int64_t> draw_after(const at::Tensor& q, int64_t first, int want, const RngKey& key) {
  if (key.purpose != Purpose::kCandidates || key.sub != 0) {
    throw std::invalid_argument("candidate draws: the key must be a kCandidates key of sub-stream 0");
  }
  if (q.is_cuda()) {
#ifdef SJD_WITH_CUDA
    const cuda::StepKeys keys{key.seed, key.sequence, key.step, 0, 0};
    const at::Tensor drawn =
        cuda::draw_candidates({q.contiguous()}, {static_cast<int64_t>(key.position)}, {first}, want, keys).to(at::kCPU);
    std::vector<int64_t> out;
    for (int64_t i = 0; i < drawn.size(1); ++i) {
      const int64_t token = drawn[0][i].item<int64_t>();
      if (token >= 0) out.push_back(token);  // -1 pads a row whose q ran out of mass
    }
    return out;
#else
    throw std::invalid_argument("candidate draws: q is on a CUDA device, but this build of sjd has no CUDA");
#endif
  }
  at::Tensor rest = q.contiguous().clone();
  rest[first] = 0.0f;
  return draw_without_replacement(rest.data_ptr<float>(), rest.numel(), want, key);
}

}  // namespace sjd::sampling
