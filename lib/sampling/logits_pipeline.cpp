#include "sampling/logits_pipeline.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace sjd::sampling {
namespace {

at::Tensor mix_cfg(const at::Tensor& logits, const PipelineSettings& settings) {
  const at::Tensor cond = logits[0];
  if (logits.size(0) < 2 || settings.cfg_scale == 1.0) return cond;
  const at::Tensor uncond = logits[1];
  if (settings.cfg_mix == CfgMix::kLogProbs) {
    const at::Tensor lc = at::log_softmax(cond, -1);
    const at::Tensor lu = at::log_softmax(uncond, -1);
    return lu + settings.cfg_scale * (lc - lu);
  }
  return uncond + settings.cfg_scale * (cond - uncond);
}

}  // namespace

at::Tensor run_logits_pipeline(const at::Tensor& logits, const std::vector<SlotConstraint>& constraints,
                               const PipelineSettings& settings) {
  if (logits.dim() != 3 || logits.size(1) != static_cast<int64_t>(constraints.size())) {
    throw std::invalid_argument("logits pipeline: expected [rows, " + std::to_string(constraints.size()) +
                                ", V] logits, got " + std::to_string(logits.dim()) + " dims");
  }
  at::Tensor x = mix_cfg(logits.to(at::kFloat), settings).clone();  // [slots, V]
  const int64_t vocab = x.size(1);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  at::Tensor probs = at::zeros_like(x);
  for (size_t s = 0; s < constraints.size(); ++s) {
    const SlotConstraint& c = constraints[s];
    if (c.forced >= 0) {
      probs[static_cast<int64_t>(s)][c.forced] = 1.0f;
      continue;
    }
    at::Tensor row = x[static_cast<int64_t>(s)];
    if (c.allowed.defined()) row.masked_fill_(c.allowed.logical_not(), neg_inf);
    if (settings.temperature <= 0.0) {
      probs[static_cast<int64_t>(s)][row.argmax().item<int64_t>()] = 1.0f;
      continue;
    }
    if (settings.temperature != 1.0) row.div_(settings.temperature);
    if (settings.top_k > 0 && settings.top_k < vocab) {
      const float kth = std::get<0>(row.topk(settings.top_k)).min().item<float>();
      row.masked_fill_(row < kth, neg_inf);
    }
    probs[static_cast<int64_t>(s)].copy_(at::softmax(row, -1));
  }
  return probs.contiguous();
}

}  // namespace sjd::sampling
