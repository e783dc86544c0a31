#pragma once
// The one generation loop: prefill, then per step build each sequence's window
// from its drafts, run the model over every window at once, the logits
// pipeline and the window verifier per sequence, commit, until the layout is
// complete. AR is the window with no drafts. decode() is a batch of one. With a
// model on a GPU the pipeline and the verification run there too
// (decoding/device_verifier.h): a step reads back what it committed and the
// next drafts' tokens, not the probabilities, in one read per step (initial
// drafts drawn from a stale p, and tree candidates, each come back in one more).
#include <cstdint>
#include <functional>
#include <optional>
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
  std::vector<model::RowPrompt> rows;  // row 0 conditional; row 1 unconditional when cfg mixes (sampling::cfg_mixes)
  sampling::PipelineSettings pipeline;
  MethodConfig method;
  uint64_t seed = 0;
  uint32_t sequence = 0;
  // What a step costs on this model and device; read by automatic windows only
  // (empty: StepCostProfile::generic()).
  StepCostProfile cost_profile;
  // Acceptance of chain drafts by age (0, 1, 2+) measured on this model for its init; read by
  // automatic windows only (empty: the planner's generic prior).
  std::vector<double> window_prior;
  // The batch size automatic windows are planned for: a step's cost is that of
  // this many sequences' windows. Part of the settings, not of the batch the
  // request happens to share (so batching never changes an image); fixed windows ignore it.
  // Above 1 the windows follow the prior alone (decoding/window_planner.h, WindowPrior::learn).
  int planned_batch = 1;
  // The caller's name for the request (a batch's prompt index), handed back with its result.
  int64_t id = 0;
  // Verify on the CPU even when the model's logits are on a GPU (each step's probabilities are
  // then copied over). The device verifier's tests compare it with this path.
  bool verify_on_host = false;
  // Called after every step; may be empty. It must not throw.
  std::function<void(const StepProgress&)> on_step;
};

struct DecodeResult {
  std::vector<int64_t> tokens;  // the generated sequence, layout().length() tokens
  RunStats stats;
};

// Probabilities from the logits pipeline, where the CPU verifier reads them: a
// CPU tensor as it is, a device tensor copied over (what a sequence verified on
// the CPU pays once per step when its model runs on a GPU).
at::Tensor probabilities_to_host(const at::Tensor& probs);

DecodeResult decode(model::TokenModel& model, const family::TokenLayout& layout, const DecodeRequest& request,
                    const Mutants& mutants = {});

// What a batch's KV cache must hold for every request it will be given.
struct BatchCapacity {
  int sequences = 1;            // decoded at once (the batch size B)
  int rows_per_sequence = 1;    // 2 with CFG
  int64_t prompt_tokens = 1;    // the longest prompt row
  int64_t prompt_position = 0;  // the largest prompt position
  int window_nodes = 0;         // the largest window any request's method may lay out
};

// Continuous batching: decodes up to capacity.sequences requests at once, each
// in its own cache rows; `next` gives the next request (none: the source is
// exhausted) whenever a sequence finishes and frees its rows, and `finished`
// gets each result as soon as its sequence completes (in completion order).
// Every sequence's tokens are those decode() gives it alone. A request that
// does not fit the capacity throws std::invalid_argument.
void decode_batch(model::TokenModel& model, const family::TokenLayout& layout, const BatchCapacity& capacity,
                  const std::function<std::optional<DecodeRequest>()>& next,
                  const std::function<void(const DecodeRequest&, DecodeResult)>& finished,
                  const Mutants& mutants = {});

}  // namespace sjd::decoding
