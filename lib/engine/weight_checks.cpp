#include "engine/weight_checks.h"

#include <regex>

#include "engine/bundle.h"

namespace sjd::engine {
namespace {

// A scan in slices, so that checking a multi-gigabyte embedding does not
// allocate a boolean copy of it.
bool all_finite(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.reshape({-1});
  constexpr int64_t kSlice = int64_t{1} << 24;
  for (int64_t begin = 0; begin < flat.numel(); begin += kSlice) {
    const int64_t length = std::min(kSlice, flat.numel() - begin);
    if (!at::isfinite(flat.narrow(0, begin, length)).all().item<bool>()) return false;
  }
  return true;
}

}  // namespace

void check_weights_usable(const io::WeightMap& weights, bool floating_only) {
  for (const std::string& name : weights.names()) {
    const at::Tensor& tensor = weights.get(name);
    if (!at::isFloatingType(tensor.scalar_type())) {
      if (!floating_only) continue;
      throw InputError(weights.source_of(name) + ": tensor '" + name + "' has dtype " +
                       std::string(c10::toString(tensor.scalar_type())) + "; model weights must be floating point");
    }
    if (!all_finite(tensor)) {
      throw InputError(weights.source_of(name) + ": tensor '" + name + "' holds NaN or infinite values");
    }
  }
}

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
