#include "engine/settings_checks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "decoding/method.h"
#include "engine/device.h"
#include "engine/setting_fields.h"
#include "sampling/relaxation.h"
#include "io/prompt_file.h"
#include "text/closest_name.h"
#include "text/unicode.h"

namespace sjd::engine {
namespace {

// "" when lo <= value <= hi and value is finite.
std::string number_problem(double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return {};
  return "must be a finite number in [" + format_setting_number(lo) + ", " + format_setting_number(hi) + "] (got " +
         format_setting_number(value) + ")";
}

template <typename T>
std::string integer_problem(T value, T lo, T hi) {
  if (value >= lo && value <= hi) return {};
  return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
         std::to_string(value) + ")";
}

}  // namespace

std::string negative_prompt_problem(const std::string& text) {
  if (std::string problem = io::prompt_text_problem(text); !problem.empty()) return "has " + problem;
  if (!text.empty() && text::unicode::is_blank(text)) {
    return "is blank (leave it out for the model's own guidance row)";
  }
  return {};
}

std::string format_setting_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

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
  if (key == "device") return device_problem(s.device);
  if (key == "dtype") return dtype_problem(s.dtype);
  try {
    if (key == "method") decoding::make_method(s.method);
    if (key == "init") decoding::parse_init_scheme(s.init);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

std::string setting_problem(const GenerationSettings& s, const std::string& key) {
  const SettingField* field = find_setting_field(key);
  if (field == nullptr) return {};
  return std::visit(
      [&s, &key](const auto& kind) -> std::string {
        using Kind = std::decay_t<decltype(kind)>;
        if constexpr (std::is_same_v<Kind, CountSetting>) {
          const int value = s.*kind.member;
          if (value == kAuto) return {};  // chosen per step (decoding/window_planner.h)
          return integer_problem(value, kind.least, kind.hi);
        } else if constexpr (std::is_same_v<Kind, NumberSetting>) {
          const double value = s.*kind.member;
          if (kind.zero_is_greedy && value == 0.0) return {};
          const std::string problem = number_problem(value, kind.lo, kind.hi);
          return problem.empty() || !kind.zero_is_greedy ? problem : problem + "; 0 decodes greedily";
        } else if constexpr (std::is_same_v<Kind, TextSetting> || std::is_same_v<Kind, FlagSetting>) {
          // Names are checked where they are parsed (name_problem); a flag is true or false.
          return key == "negative_prompt" ? negative_prompt_problem(s.negative_prompt) : std::string();
        } else {
          return integer_problem(s.*kind.member, kind.lo, kind.hi);  // IntegerSetting<T>
        }
      },
      field->kind);
}

void check_window_fits(int window, int64_t image_tokens) {
  if (window > image_tokens) {
    throw std::invalid_argument("--window " + std::to_string(window) + " is larger than the image's " +
                                std::to_string(image_tokens) + " tokens");
  }
}

}  // namespace sjd::engine
