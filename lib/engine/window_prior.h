#pragma once
// The acceptance prior of a bundle's automatic windows: bundle.json may carry
//   "window_prior": {"repeat-up": [0.607, 0.792, 0.722], "random": [0.01, 0.644, 0.728]}
// -- by draft init, the rate at which that model's chain drafts passed at age 0,
// 1, and 2 or more, measured at the bundle's defaults by scripts/window_prior.py.
// A model knows its drafts better than any generic guess (a neighbour's code is
// right far more often on flat image regions than a random one), and before an
// image has shown its own outcomes -- or in a batch, which plans from the prior
// alone -- the prior is what decides the window.
#include <vector>

#include "decoding/method.h"
#include "engine/bundle.h"

namespace sjd::engine {

// The bundle's prior for `init`; empty when the bundle has none for it (the
// planner's generic prior then applies). A malformed "window_prior" is an
// InputError naming bundle.json, the key and what is wrong.
std::vector<double> resolve_window_prior(const Bundle& bundle, decoding::InitScheme init);

}  // namespace sjd::engine
