#pragma once
// Which step-cost profile a generation's automatic windows read: the file the
// `cost_profile` setting names, else the bundle's "step_cost" entry for the
// device and dtype, else the generic assumed one of the device's kind (a CPU's or a
// GPU's: their windows cost very differently). It depends on settings and
// the bundle only (never on the machine's thread count or speed), so the same
// seed and settings choose the same windows -- and draw the same image -- anywhere.
#include <string>
#include <utility>
#include <vector>

#include "decoding/step_cost.h"
#include "engine/bundle.h"
#include "engine/settings.h"

namespace sjd::engine {

// The key of a profile in a bundle's "step_cost" object, e.g. "cpu-f32".
std::string cost_profile_key(const std::string& device, const std::string& dtype);

decoding::StepCostProfile resolve_cost_profile(const Bundle& bundle, const GenerationSettings& settings);

// Every profile the bundle's "step_cost" object holds, by key, each checked as a
// generation would read it (InputError naming bundle.json's entry otherwise).
std::vector<std::pair<std::string, decoding::StepCostProfile>> bundle_cost_profiles(const Bundle& bundle);

}  // namespace sjd::engine
