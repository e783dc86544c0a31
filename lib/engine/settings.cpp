#include "engine/settings.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/setting_fields.h"
#include "engine/settings_checks.h"
#include "text/closest_name.h"

namespace sjd::engine {
namespace {

[[noreturn]] void wrong_value(const nlohmann::json& layer, const char* key, const std::string& where,
                              const std::string& expected) {
  throw std::invalid_argument(where + ": /" + key + ": expected " + expected + " (got " + layer.at(key).dump() + ")");
}

void read_field(const nlohmann::json& layer, const char* key, const TextSetting& kind, GenerationSettings& s,
                const std::string& where) {
  if (!layer.at(key).is_string()) wrong_value(layer, key, where, "a string");
  s.*kind.member = layer.at(key).get<std::string>();
}

void read_field(const nlohmann::json& layer, const char* key, const FlagSetting& kind, GenerationSettings& s,
                const std::string& where) {
  if (!layer.at(key).is_boolean()) wrong_value(layer, key, where, "true or false");
  s.*kind.member = layer.at(key).get<bool>();
}

void read_field(const nlohmann::json& layer, const char* key, const NumberSetting& kind, GenerationSettings& s,
                const std::string& where) {
  if (!layer.at(key).is_number()) wrong_value(layer, key, where, "a number");
  s.*kind.member = layer.at(key).get<double>();
}

// JSON numbers convert silently (16.7 -> 16, 3000000000 -> a wrapped int, -1 -> 2^64-1):
// an integer setting must be a JSON integer that fits its type.
template <typename T>
void read_field(const nlohmann::json& layer, const char* key, const IntegerSetting<T>& kind, GenerationSettings& s,
                const std::string& where) {
  const nlohmann::json& value = layer.at(key);
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      wrong_value(layer, key, where, "an integer no larger than " + std::to_string(std::numeric_limits<T>::max()));
    }
  } else if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0 && std::is_unsigned_v<T>) wrong_value(layer, key, where, "a non-negative integer");
    if (std::is_signed_v<T> && (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                                v > static_cast<int64_t>(std::numeric_limits<T>::max()))) {
      wrong_value(layer, key, where, "an integer that fits in " + std::to_string(sizeof(T) * 8) + " bits");
    }
  } else {
    wrong_value(layer, key, where, "an integer");
  }
  s.*kind.member = value.get<T>();
}

// A count that may be "auto": a JSON integer (not 16.7, nor "4", as no other integer key takes a
// string) >= `least`, or the string "auto".
void read_field(const nlohmann::json& layer, const char* key, const CountSetting& kind, GenerationSettings& s,
                const std::string& where) {
  const nlohmann::json& v = layer.at(key);
  if (v == "auto") {
    s.*kind.member = kAuto;
    return;
  }
  if (!v.is_number_integer() || v.get<int64_t>() < kind.least || v.get<int64_t>() > 1000000) {
    throw std::invalid_argument(where + ": /" + key + ": expected \"auto\" or an integer >= " +
                                std::to_string(kind.least) + " (got " + v.dump() + ")");
  }
  s.*kind.member = v.get<int>();
}

nlohmann::json count_or_auto(int value) { return value == kAuto ? nlohmann::json("auto") : nlohmann::json(value); }

// "window 4 is ignored", "window 4 and init sample-up are ignored", "a, b and c are ignored".
std::string join_ignored(const std::vector<std::string>& items) {
  std::string list;
  for (size_t i = 0; i < items.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return list + (items.size() == 1 ? " is" : " are") + " ignored";
}

// Whether relaxation `relax` ("none" included) reads parameter `key` (delta, nu or one of lantern's).
bool relaxation_reads(const std::string& relax, const std::string& key) {
  if (key == "delta") return relax == "uniform" || relax == "cool";
  if (key == "nu") return relax == "cool";
  if (key == "lantern_k" || key == "lantern_lambda" || key == "lantern_own_residual") return relax == "lantern";
  throw std::logic_error("relaxation_reads: " + key + " is no relaxation parameter");
}

// Whether windows are planned before each step (a setting "auto"); false where the settings are not valid.
bool planned_windows(const GenerationSettings& s) {
  try {
    return method_from_settings(s).planned_windows();
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

int parse_count_or_auto(const std::string& text, int least, const std::string& what) {
  if (text == "auto") return kAuto;
  // from_chars, not stol: stol would also take " 4" and "+4".
  long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (!text.empty() && error == std::errc() && stop == end && value >= least && value <= 1000000) {
    return static_cast<int>(value);
  }
  throw std::invalid_argument(what + ": expected \"auto\" or an integer >= " + std::to_string(least) + " (got '" +
                              text + "')");
}

const std::vector<std::string>& setting_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const SettingField& field : setting_fields()) out.emplace_back(field.key);
    return out;
  }();
  return keys;
}

std::string prompt_file_settings_warning(const std::vector<io::PromptEntry>& prompts, const std::string& file) {
  const io::PromptEntry* first = nullptr;
  std::vector<std::string> named;  // the settings the first such line names
  int64_t lines = 0;
  for (const io::PromptEntry& entry : prompts) {
    std::vector<std::string> settings;
    for (const std::string& field : entry.other_fields) {
      if (std::find(setting_keys().begin(), setting_keys().end(), field) != setting_keys().end()) {
        settings.push_back(field);
      }
    }
    if (settings.empty()) continue;
    ++lines;
    if (first == nullptr) {
      first = &entry;
      named = std::move(settings);
    }
  }
  if (first == nullptr) return {};
  std::string list;
  for (const std::string& key : named) list += (list.empty() ? "\"" : ", \"") + key + "\"";
  return file + ":" + std::to_string(first->line) + ": " + list +
         (named.size() == 1 ? " is a setting" : " are settings") +
         ", which a prompt file does not set (" + std::to_string(lines) + " line(s) hold some): the seeds run from "
         "--seed, the rest come from flags, --config or the bundle";
}

void apply_settings(GenerationSettings& s, const nlohmann::json& layer, const std::string& where) {
  if (!layer.is_object()) throw std::invalid_argument(where + ": expected a JSON object of settings");
  const std::vector<std::string>& known_keys = setting_keys();
  for (const auto& item : layer.items()) {
    if (std::find(known_keys.begin(), known_keys.end(), item.key()) == known_keys.end()) {
      const auto guess = text::closest_name(item.key(), known_keys);
      throw std::invalid_argument(where + ": /" + item.key() + ": unknown key" +
                                  (guess ? " -- did you mean '" + *guess + "'?" : ""));
    }
  }
  for (const SettingField& field : setting_fields()) {
    if (!layer.contains(field.key)) continue;
    std::visit([&](const auto& kind) { read_field(layer, field.key, kind, s, where); }, field.kind);
    if (std::string(field.key) == "method") split_method_entry(s);
  }
  for (const auto& item : layer.items()) {
    std::string problem = setting_problem(s, item.key());
    if (problem.empty()) problem = name_problem(s, item.key());
    if (!problem.empty()) throw std::invalid_argument(where + ": /" + item.key() + ": " + problem);
  }
}

nlohmann::json settings_to_json(const GenerationSettings& s) {
  nlohmann::json out = nlohmann::json::object();
  for (const SettingField& field : setting_fields()) {
    std::visit(
        [&](const auto& kind) {
          if constexpr (std::is_same_v<std::decay_t<decltype(kind)>, CountSetting>) {
            out[field.key] = count_or_auto(s.*kind.member);
          } else {
            out[field.key] = s.*kind.member;
          }
        },
        field.kind);
  }
  return out;
}

void split_method_entry(GenerationSettings& s) {
  const size_t colon = s.method.find(':');
  if (colon == std::string::npos) {
    s.relax = "none";  // a method named without a relaxation is the lossless one
    return;
  }
  s.relax = s.method.substr(colon + 1);
  s.method.erase(colon);
}

std::string ignored_settings_note(const GenerationSettings& s, const GenerationSettings& baseline) {
  std::ostringstream note;
  const auto line = [&note]() -> std::ostream& { return note << (note.tellp() > 0 ? "\n" : "") << "note: "; };
  if (s.method == "jacobi" && s.temperature > 0.0 && s.temperature != baseline.temperature) {
    line() << "jacobi decodes greedily (argmax), so temperature " << s.temperature << " is ignored";
  }
  decoding::MethodConfig method;
  try {
    method = decoding::make_method(s.method);
  } catch (const std::invalid_argument&) {
    return note.str();  // an unknown name fails where the method is made
  }
  if (!method.speculative()) {
    std::vector<std::string> unread;
    if (s.window != kAuto) unread.push_back("window " + std::to_string(s.window));
    if (s.init != baseline.init) unread.push_back("init " + s.init);
    if (s.cost_profile != baseline.cost_profile) unread.push_back("cost_profile " + s.cost_profile);
    if (!unread.empty()) line() << s.method << " decodes one token a step, so " << join_ignored(unread);
  } else if (s.cost_profile != baseline.cost_profile && !planned_windows(s)) {
    line() << "the window and any draft tree are fixed, so cost_profile " << s.cost_profile
           << " is ignored: only automatic windows read it";
  }
  if (!method.proactive_tree && (s.pd_k != kAuto || s.pd_depth != kAuto)) {
    const char* which = s.pd_k == kAuto ? "pd_depth is" : s.pd_depth == kAuto ? "pd_k is" : "pd_k and pd_depth are";
    line() << "only sjd-pac grows draft trees, so " << which << " ignored by " << s.method;
  } else if (method.proactive_tree && s.pd_depth == 0 && s.pd_k != kAuto) {
    line() << "pd_depth 0 grows no draft tree, so pd_k " << s.pd_k << " is ignored";
  }
  if (!s.negative_prompt.empty() && s.negative_prompt != baseline.negative_prompt && !sampling::cfg_mixes(s.cfg)) {
    line() << "cfg " << format_setting_number(s.cfg)
           << " decodes without a guidance row, so negative_prompt is ignored";
  }
  if (s.temperature <= 0.0 && s.relax != "none") {
    line() << "at temperature 0 (argmax decoding) relaxation " << s.relax
           << " changes no token: the image is greedy, not lossy";
  }
  // A relaxation's parameters changed from their defaults where the relaxation in use (or none) reads none of them.
  const GenerationSettings& defaults = baseline;
  const bool reads_delta = relaxation_reads(s.relax, "delta"), reads_nu = relaxation_reads(s.relax, "nu"),
             reads_lantern = relaxation_reads(s.relax, "lantern_k");
  std::vector<std::string> unread;
  if (!reads_delta && s.delta != defaults.delta) unread.push_back("delta " + format_setting_number(s.delta));
  if (!reads_nu && s.nu != defaults.nu) unread.push_back("nu " + format_setting_number(s.nu));
  if (!reads_lantern && s.lantern_k != defaults.lantern_k) unread.push_back("lantern_k " + std::to_string(s.lantern_k));
  if (!reads_lantern && s.lantern_lambda != defaults.lantern_lambda) {
    unread.push_back("lantern_lambda " + format_setting_number(s.lantern_lambda));
  }
  if (!reads_lantern && s.lantern_own_residual) unread.push_back("lantern_own_residual");
  if (!unread.empty()) {
    line() << s.method
           << (s.relax == "none" ? " runs without a relaxation (relax none)" : " runs relaxation " + s.relax)
           << ", so " << join_ignored(unread);
  }
  return note.str();
}

std::vector<std::string> keys_without_effect(const GenerationSettings& s) {
  decoding::MethodConfig method;
  try {
    method = decoding::make_method(s.method);
  } catch (const std::invalid_argument&) {
    return {};
  }
  std::vector<std::string> keys;
  if (s.method == "jacobi") keys.push_back("temperature");
  if (!method.speculative()) keys.insert(keys.end(), {"window", "init"});
  if (!method.proactive_tree) keys.insert(keys.end(), {"pd_k", "pd_depth"});
  if (method.proactive_tree && s.pd_depth == 0) keys.push_back("pd_k");  // no tree: its width is unused
  for (const char* key : {"delta", "nu", "lantern_k", "lantern_lambda", "lantern_own_residual"}) {
    if (!relaxation_reads(s.relax, key)) keys.push_back(key);
  }
  if (!sampling::cfg_mixes(s.cfg)) keys.push_back("negative_prompt");
  // Rows of a batch decode as they would alone; only the window planner sees the batch (docs/cli.md).
  if (!planned_windows(s)) keys.insert(keys.end(), {"batch_size", "cost_profile"});
  return keys;
}

nlohmann::json identity_settings(const GenerationSettings& s) {
  nlohmann::json settings = settings_to_json(s);
  for (const std::string& key : keys_without_effect(s)) settings.erase(key);
  settings.erase("device");
  settings.erase("cost_profile");
  return settings;
}

decoding::MethodConfig method_from_settings(const GenerationSettings& s) {
  decoding::MethodConfig m = decoding::make_method(s.method);
  for (const SettingField& field : setting_fields()) {
    const std::string problem = setting_problem(s, field.key);
    if (!problem.empty()) throw std::invalid_argument(std::string(field.key) + " " + problem);
  }
  m.auto_window = m.speculative() && s.window == kAuto;
  if (m.speculative() && s.window != kAuto) m.window = s.window;
  m.init = decoding::parse_init_scheme(s.init);
  // A tree is automatic unless both of its numbers are given; one given alone keeps the other's default.
  m.auto_tree = m.proactive_tree && s.pd_k == kAuto && s.pd_depth == kAuto;
  if (s.pd_k != kAuto) m.pd_k = s.pd_k;
  if (s.pd_depth != kAuto) m.pd_depth = s.pd_depth;
  if (m.proactive_tree && !m.auto_tree && tree_node_count(m.pd_k, m.pd_depth) > kMaxTreeNodes) {
    throw std::invalid_argument("--pd-k " + std::to_string(m.pd_k) + " --pd-depth " + std::to_string(m.pd_depth) +
                                " makes a draft tree of more than " + std::to_string(kMaxTreeNodes) + " nodes");
  }
  const auto& relax_names = sampling::relax_kind_names();
  if (std::find(relax_names.begin(), relax_names.end(), s.relax) == relax_names.end()) {
    throw std::invalid_argument(text::unknown_name_message("relaxation", s.relax, relax_names));
  }
  m.relax.kind = sampling::parse_relax_kind(s.relax);
  if (m.relax.kind != sampling::RelaxKind::kNone && !(m.name == "sjd" || m.name == "scd-mc" || m.name == "sjd-pac")) {
    throw std::invalid_argument("relaxation " + s.relax + " (--relax, a relax key or a method's :" + s.relax +
                                ") applies to sjd, scd-mc and sjd-pac, not " + m.name);
  }
  m.relax.delta = s.delta;
  m.relax.nu = s.nu;
  m.relax.lantern_k = s.lantern_k;
  m.relax.lantern_lambda = s.lantern_lambda;
  m.relax.lantern_own_residual = s.lantern_own_residual;
  m.greedy = m.greedy || s.temperature <= 0.0;
  return m;
}

sampling::PipelineSettings pipeline_from_settings(const GenerationSettings& s, sampling::CfgMix mix, bool greedy) {
  sampling::PipelineSettings p;
  p.cfg_scale = s.cfg;
  p.cfg_mix = mix;
  p.temperature = greedy ? 0.0 : s.temperature;
  p.top_k = s.top_k;
  return p;
}

}  // namespace sjd::engine
