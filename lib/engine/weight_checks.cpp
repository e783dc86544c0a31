#include "engine/weight_checks.h"

#include <regex>

#include "engine/bundle.h"

namespace sjd::engine {

void check_no_extra_layers(const io::WeightMap& weights, int64_t num_layers, const std::string& where) {
  static const std::regex layer_index(R"((?:^|\.)layers\.(\d+)\.)");
  for (const std::string& name : weights.names()) {
    std::smatch match;
    if (!std::regex_search(name, match, layer_index)) continue;
    const std::string digits = match[1].str();
    if (digits.size() > 9 || std::stoll(digits) >= num_layers) {
      throw InputError(weights.source_of(name) + ": tensor '" + name + "' is for layer " + digits + ", but " + where +
                       " is " + std::to_string(num_layers) + " (weights of another model?)");
    }
  }
}

}  // namespace sjd::engine
