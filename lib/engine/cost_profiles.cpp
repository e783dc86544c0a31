#include "engine/cost_profiles.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace sjd::engine {

std::string cost_profile_key(const std::string& device, const std::string& dtype) {
  const std::string kind = device.rfind("cuda", 0) == 0 ? "cuda" : device;  // cuda:1 shares cuda's profile
  return kind + "-" + dtype;
}

decoding::StepCostProfile resolve_cost_profile(const Bundle& bundle, const GenerationSettings& settings) {
  try {
    if (!settings.cost_profile.empty()) {
      std::ifstream in(settings.cost_profile);
      if (!in) throw InputError(settings.cost_profile + ": cannot open the step-cost profile");
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(in);
      } catch (const nlohmann::json::parse_error& e) {
        throw InputError(settings.cost_profile + ": invalid JSON: " + e.what());
      }
      return decoding::StepCostProfile::from_json(j, settings.cost_profile);
    }
    const std::string key = cost_profile_key(settings.device, settings.dtype);
    const nlohmann::json& all = bundle.raw.contains("step_cost") ? bundle.raw.at("step_cost") : nlohmann::json();
    if (all.is_object() && all.contains(key)) {
      return decoding::StepCostProfile::from_json(all.at(key), bundle.json_path.string() + ": /step_cost/" + key);
    }
    if (!all.is_null() && !all.is_object()) {
      throw InputError(bundle.json_path.string() + ": /step_cost: expected an object of profiles by device-dtype");
    }
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  // Nothing measured for this model on this device: the generic shape of the device's kind.
  return settings.device.rfind("cuda", 0) == 0 ? decoding::StepCostProfile::generic_gpu()
                                               : decoding::StepCostProfile::generic();
}

}  // namespace sjd::engine
