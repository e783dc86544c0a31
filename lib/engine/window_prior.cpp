#include "engine/window_prior.h"

#include <sstream>
#include <string>

#include "engine/bundle.h"

namespace sjd::engine {
namespace {

constexpr size_t kAges = 3;        // 0, 1, and 2 or more
constexpr double kHighest = 0.99;  // a rate of 1 would promise endless windows

}  // namespace

std::vector<double> resolve_window_prior(const Bundle& bundle, decoding::InitScheme init) {
  if (!bundle.raw.contains("window_prior")) return {};
  const std::string where = bundle.json_path.string() + ": /window_prior";
  const nlohmann::json& all = bundle.raw.at("window_prior");
  if (!all.is_object()) throw InputError(where + ": expected an object of acceptance rates by draft init");
  std::vector<double> chosen;
  for (const auto& [name, rates] : all.items()) {
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
    if (name == decoding::init_scheme_name(init)) chosen = by_age;
  }
  return chosen;
}

}  // namespace sjd::engine
