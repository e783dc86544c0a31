#pragma once
// The one generation loop: prefill, then per step build the window from the
// drafts, run the model, the logits pipeline and the window verifier, commit,
// until the layout is complete. AR is the window with no drafts.
#include <cstdint>
#include <functional>
#include <vector>

#include "decoding/method.h"
#include "decoding/mutants.h"
#include "decoding/run_stats.h"
#include "decoding/step_cost.h"
#include "family/token_layout.h"
#include "model/token_model.h"
#include "sampling/logits_pipeline.h"

namespace sjd::decoding {

// Where a decode stands after a step (progress lines).
struct StepProgress {
  int64_t tokens_done = 0;
  int64_t tokens_total = 0;
  int64_t steps = 0;
};

struct DecodeRequest {
  std::vector<model::RowPrompt> rows;  // row 0 conditional; row 1 unconditional when cfg != 1
  sampling::PipelineSettings pipeline;
  MethodConfig method;
  uint64_t seed = 0;
  uint32_t sequence = 0;
  // What a step costs on this model and device; read by automatic windows only
  // (empty: StepCostProfile::generic()).
  StepCostProfile cost_profile;
  // Called after every step; may be empty. It must not throw.
  std::function<void(const StepProgress&)> on_step;
};

struct DecodeResult {
  std::vector<int64_t> tokens;  // the generated sequence, layout().length() tokens
  RunStats stats;
};

DecodeResult decode(model::TokenModel& model, const family::TokenLayout& layout, const DecodeRequest& request,
                    const Mutants& mutants = {});

}  // namespace sjd::decoding
