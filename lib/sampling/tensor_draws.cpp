#include "sampling/tensor_draws.h"

#include <algorithm>
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

namespace {

#ifdef SJD_WITH_CUDA
std::vector<std::vector<int64_t>> draw_after_on_device(const std::vector<CandidateDraw>& draws) {
  std::vector<at::Tensor> q;
  std::vector<int64_t> positions, firsts;
  std::vector<cuda::StepKeys> keys;
  int most = 0;
  for (const CandidateDraw& d : draws) {
    if (!d.q.is_cuda() || d.q.device() != draws.front().q.device()) {
      throw std::invalid_argument("candidate draws: every q must be on the first one's CUDA device");
    }
    q.push_back(d.q.contiguous());
    positions.push_back(static_cast<int64_t>(d.key.position));
    firsts.push_back(d.first);
    keys.push_back({d.key.seed, d.key.sequence, d.key.step, 0, 0});
    most = std::max(most, d.want);
  }
  // The kernel draws a row's candidates in order, so each row's first `want` of `most` are its own draw's.
  const at::Tensor drawn = cuda::draw_candidates(q, positions, firsts, most, keys).to(at::kCPU).contiguous();
  const int64_t* tokens = drawn.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> out(draws.size());
  for (size_t i = 0; i < draws.size(); ++i) {
    for (int j = 0; j < draws[i].want; ++j) {
      const int64_t token = tokens[static_cast<int64_t>(i) * most + j];
      if (token >= 0) out[i].push_back(token);  // -1 pads a row whose q ran out of mass
    }
  }
  return out;
}
#endif

}  // namespace

std::vector<std::vector<int64_t>> draw_after(const std::vector<CandidateDraw>& draws) {
  for (const CandidateDraw& d : draws) {
    if (d.key.purpose != Purpose::kCandidates || d.key.sub != 0) {
      throw std::invalid_argument("candidate draws: the key must be a kCandidates key of sub-stream 0");
    }
  }
  if (!draws.empty() && draws.front().q.is_cuda()) {
#ifdef SJD_WITH_CUDA
    return draw_after_on_device(draws);
#else
    throw std::invalid_argument("candidate draws: q is on a CUDA device, but this build of sjd has no CUDA");
#endif
  }
  std::vector<std::vector<int64_t>> out;
  for (const CandidateDraw& d : draws) {
    if (!d.q.is_cpu()) throw std::invalid_argument("candidate draws: every q must be on the first one's device");
    at::Tensor rest = d.q.contiguous().clone();
    rest[d.first] = 0.0f;
    out.push_back(draw_without_replacement(rest.data_ptr<float>(), rest.numel(), d.want, d.key));
  }
  return out;
}

}  // namespace sjd::sampling
