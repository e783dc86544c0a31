#pragma once
// The one logits pipeline every method shares, applied to every window slot
// before anything compares p with q:
//   CFG mix (on logits or on log-probs) -> structural constraint (forced token,
//   or mask to the allowed tokens) -> temperature -> top-k -> softmax.
// Forced tokens come out as point masses; temperature 0 means greedy (a point
// mass on the argmax), which is how `jacobi` decodes.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace sjd::sampling {

enum class CfgMix { kLogits, kLogProbs };

struct PipelineSettings {
  double cfg_scale = 1.0;  // guidance scale; rows beyond the first are ignored at 1.0
  CfgMix cfg_mix = CfgMix::kLogits;
  double temperature = 1.0;
  int64_t top_k = 0;       // 0: no top-k
};

// Whether a guidance scale mixes the unconditional row in: decided in float, as the CUDA pipeline decides it, so
// a scale within float rounding of 1 mixes on neither device and a generation computes no row it would not use.
inline bool cfg_mixes(double cfg_scale) { return static_cast<float>(cfg_scale) != 1.0f; }

// The constraint of one slot: a forced token, or a boolean [V] mask of allowed
// tokens (undefined tensor: every token allowed).
struct SlotConstraint {
  int64_t forced = -1;
  at::Tensor allowed;
};

// The window's constraints as the pipeline (and the CUDA kernels) consume them:
// one forced token or mask row per slot, each distinct mask stored once.
struct ConstraintTable {
  std::vector<int64_t> forced;        // [slots]: forced token or -1
  at::Tensor masks;                   // bool [distinct masks, V] (undefined when no slot has a mask)
  std::vector<int32_t> mask_of_slot;  // [slots]: row of `masks`, or -1 (every token allowed)
};
ConstraintTable make_constraint_table(const std::vector<SlotConstraint>& constraints, int64_t vocab);

// Every slot at once, as tensor operations over [slots, V].
// logits: [rows, slots, V] (row 0 conditional, row 1 unconditional when CFG is
// on). Returns probabilities [slots, V], float32, contiguous, on the logits'
// device: this CPU reference, or on CUDA the fused kernel (cuda_ops.h).
// `columns`: the ascending token ids the model computed logits for (a restricted output
// head, model::TokenModel::output_ids), every other logit being the lowest float. Those
// tokens' probabilities are 0 whatever the settings, so on CUDA the kernel runs on the
// columns alone (Lumina: 8198 of 65536 per slot) and the rest is written as 0 (a forced
// slot is its point mass wherever its token is); a slot masked to none of them makes the
// call run the whole width. The CPU reference ignores it.
at::Tensor run_logits_pipeline(const at::Tensor& logits, const std::vector<SlotConstraint>& constraints,
                               const PipelineSettings& settings, const std::vector<int64_t>& columns = {});

}  // namespace sjd::sampling
