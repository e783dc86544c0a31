#include "sampling/logits_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#ifdef SJD_WITH_CUDA
#include "sampling/cuda_ops.h"
#endif

namespace sjd::sampling {
namespace {

at::Tensor mix_cfg(const at::Tensor& logits, const PipelineSettings& settings) {
  const at::Tensor cond = logits[0];
  if (logits.size(0) < 2 || !cfg_mixes(settings.cfg_scale)) return cond;
  const at::Tensor uncond = logits[1];
  if (settings.cfg_mix == CfgMix::kLogProbs) {
    const at::Tensor lc = at::log_softmax(cond, -1);
    const at::Tensor lu = at::log_softmax(uncond, -1);
    return lu + settings.cfg_scale * (lc - lu);
  }
  return uncond + settings.cfg_scale * (cond - uncond);
}

}  // namespace

ConstraintTable make_constraint_table(const std::vector<SlotConstraint>& constraints, int64_t vocab) {
  ConstraintTable table;
  std::unordered_map<const void*, int32_t> row_of;  // slots usually share one mask tensor (the image codes)
  std::vector<at::Tensor> masks;
  for (const SlotConstraint& c : constraints) {
    if (c.forced >= vocab) {
      throw std::invalid_argument("logits pipeline: a slot is forced to token " + std::to_string(c.forced) +
                                  ", past the vocabulary of " + std::to_string(vocab));
    }
    table.forced.push_back(c.forced);
    int32_t row = -1;
    if (c.forced < 0 && c.allowed.defined()) {
      if (c.allowed.numel() != vocab) {
        throw std::invalid_argument("logits pipeline: a slot's allowed mask has " + std::to_string(c.allowed.numel()) +
                                    " entries for a vocabulary of " + std::to_string(vocab));
      }
      auto [it, added] = row_of.emplace(c.allowed.unsafeGetTensorImpl(), static_cast<int32_t>(masks.size()));
      if (added) masks.push_back(c.allowed.to(at::kBool));
      row = it->second;
    }
    table.mask_of_slot.push_back(row);
  }
  if (!masks.empty()) table.masks = at::stack(masks);
  return table;
}

at::Tensor run_logits_pipeline(const at::Tensor& logits, const std::vector<SlotConstraint>& constraints,
                               const PipelineSettings& settings, const std::vector<int64_t>& columns) {
  if (logits.dim() != 3 || logits.size(1) != static_cast<int64_t>(constraints.size())) {
    throw std::invalid_argument("logits pipeline: expected [rows, " + std::to_string(constraints.size()) +
                                ", V] logits, got " + std::to_string(logits.dim()) + " dims");
  }
  if (logits.is_cuda()) {
    // The fused kernel takes the same inputs on the device (tests/cuda holds it to this reference).
#ifdef SJD_WITH_CUDA
    // SJD_PIPELINE_COLUMNS=0 runs the whole width always (to compare, or if the columns path fails on a device).
    static const bool columns_on = [] {
      const char* v = std::getenv("SJD_PIPELINE_COLUMNS");
      return v == nullptr || std::string(v) != "0";
    }();
    if (columns_on && !columns.empty() && static_cast<int64_t>(columns.size()) < logits.size(2)) {
      at::Tensor probs = cuda::run_logits_pipeline_on_columns(logits, constraints, settings, columns);
      if (probs.defined()) return probs;
    }
    return cuda::run_logits_pipeline(logits, cuda::upload_constraints(constraints, logits.size(2), logits.device()),
                                     settings);
#else
    throw std::invalid_argument("logits pipeline: the logits are on a CUDA device, but this build of sjd has no CUDA");
#endif
  }
  const int64_t slots = logits.size(1), vocab = logits.size(2);
  const ConstraintTable table = make_constraint_table(constraints, vocab);
  at::Tensor x = mix_cfg(logits.to(at::kFloat), settings).clone();  // [slots, V]
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // Structural constraint: every masked slot at once (row `masks.size(0)` of the table allows everything).
  if (table.masks.defined()) {
    const at::Tensor with_all = at::cat({table.masks, at::ones({1, vocab}, at::kBool)});
    std::vector<int64_t> rows(table.mask_of_slot.size());
    for (size_t s = 0; s < rows.size(); ++s) {
      rows[s] = table.mask_of_slot[s] >= 0 ? table.mask_of_slot[s] : table.masks.size(0);
    }
    x.masked_fill_(with_all.index_select(0, at::tensor(rows, at::kLong)).logical_not(), neg_inf);
  }

  at::Tensor probs;
  if (settings.temperature <= 0.0) {
    // Greedy: a point mass on each slot's argmax. A slot whose largest logit is not finite (a NaN anywhere,
    // +inf, every token masked) gets no mass at all, as softmax leaves a sampled one, so that its draw fails
    // ("no token has a positive probability") on either device: argmax would take a NaN as the largest here
    // and skip it on the GPU, each device quietly picking a token of its own.
    const at::Tensor finite = at::isfinite(x.amax(-1, /*keepdim=*/true));  // amax propagates NaN
    probs = at::zeros_like(x).scatter_(1, x.argmax(-1, /*keepdim=*/true), 1.0f).mul_(finite);
  } else {
    if (settings.temperature != 1.0) x.div_(settings.temperature);
    if (settings.top_k > 0 && settings.top_k < vocab) {
      const at::Tensor kth = std::get<0>(x.topk(settings.top_k, -1)).narrow(-1, settings.top_k - 1, 1);  // [slots, 1]
      x.masked_fill_(x < kth, neg_inf);
    }
    probs = at::softmax(x, -1).contiguous();
  }
  // Forced slots are point masses whatever the model said.
  float* p = probs.data_ptr<float>();
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t forced = table.forced[static_cast<size_t>(s)];
    if (forced < 0) continue;
    std::fill(p + s * vocab, p + (s + 1) * vocab, 0.0f);
    p[s * vocab + forced] = 1.0f;
  }
  return probs;
}

}  // namespace sjd::sampling
