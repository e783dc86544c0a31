#include "sampling/tensor_draws.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sampling/categorical.h"

#ifdef SJD_WITH_CUDA
#include "sampling/cuda_ops.h"
#endif

namespace sjd::sampling {

int64_t sample_from(const at::Tensor& q, const RngKey& key) {
  // A device q is read back for this draw (a decode's draws go through sample_each).
  const at::Tensor host = q.is_cpu() ? q.contiguous() : q.to(at::kCPU).contiguous();
  return sample_token(host.data_ptr<float>(), host.numel(), key);
}

namespace {

// Whether a call's draws run on a CUDA device: every q must be on the first one's device,
// and a CUDA one needs a build with CUDA (without, it throws rather than answer true).
template <typename Draw>
bool draws_on_cuda(const std::vector<Draw>& draws, const char* what) {
  const at::Device device = draws.front().q.device();
  for (const Draw& d : draws) {
    if (d.q.device() != device) {
      throw std::invalid_argument(std::string(what) + ": every q must be on the first one's device (" +
                                  device.str() + "), one is on " + d.q.device().str());
    }
  }
#ifndef SJD_WITH_CUDA
  if (device.is_cuda()) {
    throw std::invalid_argument(std::string(what) + ": q is on a CUDA device, but this build of sjd has no CUDA");
  }
#endif
  return device.is_cuda();
}

#ifdef SJD_WITH_CUDA
std::vector<int64_t> sample_each_on_device(const std::vector<RowDraw>& draws) {
  std::vector<at::Tensor> q;
  std::vector<kernels::PhiloxStream> streams;
  for (const RowDraw& d : draws) {
    q.push_back(d.q.contiguous());
    streams.push_back({d.key.seed, d.key.sequence, d.key.step, d.key.position, static_cast<uint32_t>(d.key.purpose),
                       d.key.sub});
  }
  const at::Tensor drawn = cuda::sample_rows(q, streams).to(at::kCPU).contiguous();
  const int64_t* tokens = drawn.data_ptr<int64_t>();
  std::vector<int64_t> out(tokens, tokens + drawn.numel());
  for (int64_t token : out) {
    if (token < 0) throw_no_positive_probability();  // as sample_token on the CPU
  }
  return out;
}

std::vector<std::vector<int64_t>> draw_after_on_device(const std::vector<CandidateDraw>& draws) {
  std::vector<at::Tensor> q;
  std::vector<int64_t> positions, firsts;
  std::vector<cuda::StepKeys> keys;
  int most = 0;
  for (const CandidateDraw& d : draws) {
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

std::vector<int64_t> sample_each(const std::vector<RowDraw>& draws) {
  if (draws.empty()) return {};
  if (draws_on_cuda(draws, "initial draws")) {
#ifdef SJD_WITH_CUDA
    return sample_each_on_device(draws);
#endif
  }
  std::vector<int64_t> out;
  for (const RowDraw& d : draws) out.push_back(sample_from(d.q, d.key));
  return out;
}

std::vector<std::vector<int64_t>> draw_after(const std::vector<CandidateDraw>& draws) {
  for (const CandidateDraw& d : draws) {
    if (d.key.purpose != Purpose::kCandidates || d.key.sub != 0) {
      throw std::invalid_argument("candidate draws: the key must be a kCandidates key of sub-stream 0");
    }
  }
  if (draws.empty()) return {};
  if (draws_on_cuda(draws, "candidate draws")) {
#ifdef SJD_WITH_CUDA
    return draw_after_on_device(draws);
#endif
  }
  std::vector<std::vector<int64_t>> out;
  for (const CandidateDraw& d : draws) {
    at::Tensor rest = d.q.contiguous().clone();
    rest[d.first] = 0.0f;
    out.push_back(draw_without_replacement(rest.data_ptr<float>(), rest.numel(), d.want, d.key));
  }
  return out;
}

}  // namespace sjd::sampling
