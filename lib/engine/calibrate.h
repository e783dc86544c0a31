#pragma once
// `sjd bench --calibrate`: the step-cost profile of a real bundle on this
// machine -- ms of one step (forward and logits pipeline, every CFG row of
// every prompt) for a range of window sizes at mid-image, one curve per batch
// size -- for the automatic window choice.
#include <functional>
#include <vector>

#include "decoding/step_cost.h"
#include "engine/generator.h"

namespace sjd::engine {

struct CalibrateOptions {
  std::vector<int> tokens = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};  // per row: root + drafts
  std::vector<int> batch_sizes = {1};  // prompts per forward: one curve each
  int iterations = 7;  // timed repetitions per size (the fastest is kept)
  int warmup = 2;
  // Told before each batch size's curve is timed (a default calibration takes minutes); may be empty.
  std::function<void(int batch, int index, int count)> on_curve;
};

// Times the generator's model with `settings` (cfg decides the rows per
// prompt). A batch size whose KV cache would not fit the memory is refused
// (InputError with the estimate) before anything is allocated.
// Timings are made non-decreasing in the window size (noise on a shared
// machine must not make a bigger window look cheaper than a smaller one).
decoding::StepCostProfile calibrate_step_cost(Generator& generator, const GenerationSettings& settings,
                                              const CalibrateOptions& options);

}  // namespace sjd::engine
