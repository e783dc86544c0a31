#include "engine/window_prior.h"

#include <map>
#include <sstream>
#include <string>

namespace sjd::engine {
namespace {

constexpr size_t kAges = 3;        // 0, 1, and 2 or more
constexpr double kHighest = 0.99;  // a rate of 1 would promise endless windows

// The rates of one init, checked.
std::vector<double> read_rates(const std::string& where, const std::string& name, const nlohmann::json& rates) {
  try {
    decoding::parse_init_scheme(name);
  } catch (const std::invalid_argument& e) {
    throw InputError(where + "/" + name + ": " + e.what());
  }
  if (!rates.is_array() || rates.size() != kAges) {
    throw InputError(where + "/" + name + ": expected 3 acceptance rates (draft ages 0, 1, 2 and older)");
  }
  std::vector<double> by_age;
  for (size_t age = 0; age < kAges; ++age) {
    const nlohmann::json& r = rates[age];
    if (!r.is_number() || !(r.get<double>() >= 0.0 && r.get<double>() <= kHighest)) {
      std::ostringstream message;
      message << where << "/" << name << "/" << age << ": expected a rate from 0 to " << kHighest << ", got "
              << r.dump();
      throw InputError(message.str());
    }
    by_age.push_back(r.get<double>());
  }
  return by_age;
}

// Every init's rates, checked; an empty map when the bundle has none.
std::map<std::string, std::vector<double>> read_window_prior(const Bundle& bundle) {
  std::map<std::string, std::vector<double>> by_init;
  if (!bundle.raw.contains("window_prior")) return by_init;
  const std::string where = bundle.json_path.string() + ": /window_prior";
  const nlohmann::json& all = bundle.raw.at("window_prior");
  if (!all.is_object()) throw InputError(where + ": expected an object of acceptance rates by draft init");
  for (const auto& [name, rates] : all.items()) by_init[name] = read_rates(where, name, rates);
  return by_init;
}

}  // namespace

void check_window_prior(const Bundle& bundle) { read_window_prior(bundle); }

std::vector<double> resolve_window_prior(const Bundle& bundle, const GenerationSettings& settings,
                                         const decoding::MethodConfig& method) {
  const auto by_init = read_window_prior(bundle);
  const auto found = by_init.find(decoding::init_scheme_name(method.init));
  if (found == by_init.end() || method.greedy) return {};
  GenerationSettings measured;  // what scripts/window_prior.py ran: the bundle's defaults
  apply_settings(measured, bundle.defaults, bundle.json_path.string() + ": defaults");
  if (settings.temperature != measured.temperature || settings.top_k != measured.top_k ||
      settings.cfg != measured.cfg) {
    return {};
  }
  return found->second;
}

}  // namespace sjd::engine
