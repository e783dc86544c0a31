#include "engine/cost_profiles.h"

#include <nlohmann/json.hpp>

#include "engine/settings.h"

namespace sjd::engine {

std::string cost_profile_key(const std::string& device, const std::string& dtype) {
  const std::string kind = device.rfind("cuda", 0) == 0 ? "cuda" : device;  // cuda:1 shares cuda's profile
  return kind + "-" + dtype;
}

namespace {

const nlohmann::json& step_cost_entries(const Bundle& bundle) {
  static const nlohmann::json none;
  const nlohmann::json& all = bundle.raw.contains("step_cost") ? bundle.raw.at("step_cost") : none;
  if (!all.is_null() && !all.is_object()) {
    throw InputError(bundle.json_path.string() + ": /step_cost: expected an object of profiles by device-dtype");
  }
  return all;
}

decoding::StepCostProfile bundle_profile(const Bundle& bundle, const std::string& key) {
  try {
    return decoding::StepCostProfile::from_json(step_cost_entries(bundle).at(key),
                                                bundle.json_path.string() + ": /step_cost/" + key);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

}  // namespace

decoding::StepCostProfile resolve_cost_profile(const Bundle& bundle, const GenerationSettings& settings) {
  // The file is read only where automatic windows read it; elsewhere a note says it is ignored (and then
  // failing on it contradicted the note).
  if (!settings.cost_profile.empty() && method_from_settings(settings).planned_windows()) {
    // As every JSON input: a regular file, keys once per object, nesting bounded; errors name the file.
    const nlohmann::json profile = read_json_input(settings.cost_profile, "step-cost profile");
    try {
      return decoding::StepCostProfile::from_json(profile, settings.cost_profile);
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
  }
  const std::string key = cost_profile_key(settings.device, settings.dtype);
  if (step_cost_entries(bundle).contains(key)) return bundle_profile(bundle, key);
  // Nothing measured for this model on this device: the generic shape of the device's kind.
  return settings.device.rfind("cuda", 0) == 0 ? decoding::StepCostProfile::generic_gpu()
                                               : decoding::StepCostProfile::generic();
}

std::vector<std::pair<std::string, decoding::StepCostProfile>> bundle_cost_profiles(const Bundle& bundle) {
  std::vector<std::pair<std::string, decoding::StepCostProfile>> profiles;
  for (const auto& [key, entry] : step_cost_entries(bundle).items())
    profiles.emplace_back(key, bundle_profile(bundle, key));
  return profiles;
}

}  // namespace sjd::engine
