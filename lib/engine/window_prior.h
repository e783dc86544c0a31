#pragma once
// The acceptance prior of a bundle's automatic windows: bundle.json may carry
//   "window_prior": {"repeat-up": [0.607, 0.792, 0.722], "random": [0.01, 0.644, 0.728]}
// -- by draft init, the rate at which that model's chain drafts passed at age 0,
// 1, and 2 or more, measured at the bundle's default sampling settings by
// scripts/window_prior.py. A model knows its drafts better than any generic
// guess (a neighbour's code is right far more often on flat image regions than
// a random one), and before an image has shown its own outcomes -- or in a
// batch, which plans from the prior alone -- the prior is what decides the window.
#include <vector>

#include "decoding/method.h"
#include "engine/bundle.h"
#include "engine/settings.h"

namespace sjd::engine {

// Throws InputError naming bundle.json, the key and what is wrong when the
// bundle's "window_prior" is malformed (called when a run starts, whatever it decodes).
void check_window_prior(const Bundle& bundle);

// The bundle's prior for the run's init; empty (the planner's generic prior)
// when the bundle has none for it, when the method decodes greedily, or when
// the run samples otherwise than the bundle's defaults it was measured at
// (temperature, top-k, cfg): acceptance moves with all of these.
std::vector<double> resolve_window_prior(const Bundle& bundle, const GenerationSettings& settings,
                                         const decoding::MethodConfig& method);

}  // namespace sjd::engine
