#include "engine/settings_checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "decoding/method.h"
#include "sampling/relaxation.h"
#include "text/closest_name.h"

namespace sjd::engine {
namespace {

// "" when lo <= value <= hi and value is finite.
std::string number_problem(double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return {};
  return "must be a finite number in [" + format_setting_number(lo) + ", " + format_setting_number(hi) + "] (got " +
         format_setting_number(value) + ")";
}

std::string integer_problem(int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return {};
  return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
         std::to_string(value) + ")";
}

}  // namespace

std::string format_setting_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string window_problem(int64_t window) { return integer_problem(window, 1, kMaxWindow); }

int64_t tree_node_count(int64_t pd_k, int64_t pd_depth) {
  int64_t nodes = 0;
  int64_t level = 1;
  for (int64_t d = 0; d < pd_depth; ++d) {
    if (pd_k > 0 && level > (kMaxTreeNodes + 1) / pd_k) return kMaxTreeNodes + 1;
    level *= pd_k;
    nodes += level;
    if (nodes > kMaxTreeNodes) return kMaxTreeNodes + 1;
  }
  return nodes;
}

std::string name_problem(const GenerationSettings& s, const std::string& key) {
  // "sjd-pac:cool" in a method entry names a relaxation too.
  const auto& relax_names = sampling::relax_kind_names();
  if ((key == "method" || key == "relax") &&
      std::find(relax_names.begin(), relax_names.end(), s.relax) == relax_names.end()) {
    return text::unknown_name_message("relaxation", s.relax, relax_names);
  }
  try {
    if (key == "method") decoding::make_method(s.method);
    if (key == "init") decoding::parse_init_scheme(s.init);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

std::string setting_problem(const GenerationSettings& s, const std::string& key) {
  if (key == "window" || key == "pd_k" || key == "pd_depth" || key == "batch_size") {
    const int value = key == "window" ? s.window : key == "pd_k" ? s.pd_k : key == "pd_depth" ? s.pd_depth : s.batch_size;
    if (value == kAuto) return {};  // chosen per step (decoding/window_planner.h)
  }
  if (key == "window") return window_problem(s.window);
  if (key == "pd_k") return integer_problem(s.pd_k, 1, 64);
  if (key == "pd_depth") return integer_problem(s.pd_depth, 0, 16);
  if (key == "batch_size") return integer_problem(s.batch_size, 1, kMaxBatchSize);
  if (key == "delta") return number_problem(s.delta, 0.0, 100.0);
  if (key == "nu") return number_problem(s.nu, 0.0, 100.0);
  if (key == "lantern_k") return integer_problem(s.lantern_k, 1, 1024);
  if (key == "lantern_lambda") return number_problem(s.lantern_lambda, 0.0, 1000.0);
  if (key == "cfg") return number_problem(s.cfg, 0.0, kMaxGuidance);
  if (key == "temperature") {
    if (s.temperature == 0.0) return {};  // greedy
    const std::string problem = number_problem(s.temperature, kMinTemperature, kMaxTemperature);
    return problem.empty() ? problem : problem + "; 0 decodes greedily";
  }
  if (key == "top_k") return integer_problem(s.top_k, 0, std::numeric_limits<int32_t>::max());
  if (key == "resolution") return integer_problem(s.resolution, 0, kMaxResolution);
  return {};  // strings (checked where they are parsed), booleans, the seed (any uint64)
}

void check_window_fits(int window, int64_t image_tokens) {
  if (window > image_tokens) {
    throw std::invalid_argument("--window " + std::to_string(window) + " is larger than the image's " +
                                std::to_string(image_tokens) + " tokens");
  }
}

}  // namespace sjd::engine
