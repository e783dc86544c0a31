#pragma once
// `sjd bench --calibrate`: the step-cost profile of a real bundle on this
// machine -- ms of one step (forward and logits pipeline, both CFG rows) for a
// range of window sizes at mid-image -- for the automatic window choice.
#include <vector>

#include "decoding/step_cost.h"
#include "engine/generator.h"

namespace sjd::engine {

struct CalibrateOptions {
  std::vector<int> tokens = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};  // per row: root + drafts
  int iterations = 7;  // timed repetitions per size (the fastest is kept)
  int warmup = 2;
};

// Times the generator's model with `settings` (cfg decides the row count).
// Timings are made non-decreasing in the window size (noise on a shared
// machine must not make a bigger window look cheaper than a smaller one).
decoding::StepCostProfile calibrate_step_cost(Generator& generator, const GenerationSettings& settings,
                                              const CalibrateOptions& options);

}  // namespace sjd::engine
