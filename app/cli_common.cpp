#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <limits>
#include <sstream>
#include <type_traits>

#include "engine/bundle.h"
#include "engine/device.h"
#include "engine/memory_estimate.h"
#include "engine/settings_checks.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::app {
namespace {

// The settings key of a flag: "--pd-k,..." -> "pd_k".
std::string key_of(const std::string& flag) {
  std::string key = flag.substr(2, flag.find(',') == std::string::npos ? std::string::npos : flag.find(',') - 2);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// CLI11 reads a number past an integer type's range as the nearest end of it, and "-1" into an
// unsigned one as 2^64-1: the text itself must be an integer of the type.
template <typename T>
std::string integer_text_problem(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (!text.empty() && error == std::errc() && stop == end) return "";
  // Past the type's range: said as the type's limit on that side (a setting's own range is said instead by
  // setting_integer_text_problem; another flag's own range is checked once its value is read).
  if (error == std::errc::result_out_of_range && stop == end) {
    const bool below = text.rfind('-', 0) == 0;
    return "must be an integer no " + std::string(below ? "smaller" : "larger") + " than " +
           std::to_string(below ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max()) +
           " (got " + text + ")";
  }
  if (std::is_unsigned_v<T> && text.rfind('-', 0) == 0) return "must be a non-negative integer (got " + text + ")";
  return "must be an integer in decimal digits (got " + text + ")";
}

// CLI11 reads an empty text as 0 (an unset shell variable: `--temperature "$T"` decoded greedily) and takes
// hexadecimal floats: a decimal flag's text must be a decimal number (ranges are checked with the setting).
// strtod skips leading white space: " 1" was taken while "1 " was refused.
// A number too small for a double (1e-400) was taken as 0: --temperature 1e-400 decoded greedily.
std::string decimal_text_problem(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  const bool whole = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) &&
                     end == text.c_str() + text.size();
  if (!whole || text.find_first_of("xX") != std::string::npos) return "must be a decimal number (got '" + text + "')";
  if (errno == ERANGE && value == 0.0) return "is too close to 0 for a double, which would hold 0 (got " + text + ")";
  return "";
}

// integer_text_problem, with a number past T's range told in the terms of setting `key`: its own range
// ("--top-k 99999999999999999999" must be in [0, 2147483647], not T's [-2^63, 2^63 - 1]).
template <typename T>
std::string setting_integer_text_problem(const std::string& text, T engine::GenerationSettings::*field,
                                         const std::string& key) {
  const std::string problem = integer_text_problem<T>(text);
  if (problem.rfind("must be an integer no ", 0) != 0) return problem;
  engine::GenerationSettings s;
  s.*field = text.rfind('-', 0) == 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  const std::string ranged = engine::setting_problem(s, key);
  if (ranged.empty()) return problem;  // the type's whole range is the setting's (seed)
  return ranged.substr(0, ranged.rfind(" (got ")) + " (got " + text + ")";
}

template <typename T>
void add_setting(CLI::App& cmd, std::vector<CLI::Option*>& options,
                 std::vector<std::function<void(engine::GenerationSettings&)>>& appliers, const std::string& flag,
                 T* value, T engine::GenerationSettings::*field, const std::string& help) {
  CLI::Option* option = cmd.add_option(flag, *value, help);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    option->check([field, key = key_of(flag)](const std::string& text) {
      return setting_integer_text_problem<T>(text, field, key);
    });
  }
  if constexpr (std::is_floating_point_v<T>) option->check(decimal_text_problem);
  options.push_back(option);
  appliers.push_back([option, value, field, key = key_of(flag)](engine::GenerationSettings& s) {
    if (option->count() == 0) return;
    s.*field = *value;
    const std::string problem = engine::setting_problem(s, key);
    if (!problem.empty()) throw std::invalid_argument(option->get_name() + " " + problem);
  });
}

// A count flag that also takes "auto" (engine::parse_count_or_auto).
void add_count_setting(CLI::App& cmd, std::vector<CLI::Option*>& options,
                       std::vector<std::function<void(engine::GenerationSettings&)>>& appliers, const std::string& flag,
                       int least, int engine::GenerationSettings::*field, const std::string& help) {
  auto text = std::make_shared<std::string>();
  CLI::Option* option = cmd.add_option(flag, *text, help);
  options.push_back(option);
  const std::string name = flag.substr(0, flag.find(','));
  appliers.push_back([option, text, field, least, name, key = key_of(flag)](engine::GenerationSettings& s) {
    if (option->count() == 0) return;
    try {
      s.*field = engine::parse_count_or_auto(*text, least, name);
    } catch (const std::invalid_argument& e) {
      throw engine::InputError(e.what());
    }
    // The same upper bounds a config file's value is held to (--batch-size 1000000 planned windows
    // for a million prompts).
    const std::string problem = engine::setting_problem(s, key);
    if (!problem.empty()) throw engine::InputError(name + " " + problem);
  });
}

}  // namespace

void refuse_empty_values(CLI::App& command) {
  command.parse_complete_callback([&command] {
    for (const CLI::Option* option : command.get_options()) {
      // -p "" is refused as a blank prompt; --negative-prompt "" is the model's own guidance row again, so
      // that the command line can undo a config file's or bundle's negative prompt.
      if (option->count() == 0 || !option->nonpositional() || option->get_name() == "--prompt" ||
          option->get_name() == "--negative-prompt") {
        continue;
      }
      for (const std::string& value : option->results()) {
        if (value.empty()) {
          throw CLI::ValidationError(option->get_name(),
                                     "an empty value (an unset shell variable?); leave the flag out instead");
        }
      }
    }
  });
}

template <typename T>
CLI::Option* add_integer_option(CLI::App& command, const std::string& flag, T& value, const std::string& help) {
  return command.add_option(flag, value, help)->check(integer_text_problem<T>);
}
template CLI::Option* add_integer_option(CLI::App&, const std::string&, int&, const std::string&);
template CLI::Option* add_integer_option(CLI::App&, const std::string&, int64_t&, const std::string&);
template CLI::Option* add_integer_option(CLI::App&, const std::string&, uint64_t&, const std::string&);

void SettingsFlags::add_to(CLI::App& cmd) {
  auto& o = options_;
  auto& a = appliers_;
  using S = engine::GenerationSettings;
  cmd.add_option("--config", config_, "JSON file of generation settings (keys as the long flags, '_' for '-')");
  cmd.add_option("--max-memory", max_memory_,
                 "refuse a generation estimated to need more (e.g. 8G; default: the memory available)");
  add_trust_code_flag(cmd, trust_code_);
  add_setting(cmd, o, a, "--method", &values_.method, &S::method,
              "ar | jacobi (greedy) | sjd | scd-mc (alias pac-ac) | scd-gs | sjd-pac (exact unless --relax); "
              "name:relaxation (sjd-pac:lantern) also sets --relax");
  a.push_back([method = o.back()](engine::GenerationSettings& s) {  // before --relax's applier: a given --relax wins
    if (method->count() > 0) engine::split_method_entry(s);
  });
  add_count_setting(cmd, o, a, "--window,-L", 1, &S::window,
                    "draft positions per step, or auto (default: chosen per step from the step-cost profile)");
  add_setting(cmd, o, a, "--init", &values_.init, &S::init,
              "new draft positions: random | repeat-left | repeat-up | sample-left | sample-up");
  add_count_setting(cmd, o, a, "--pd-k", 1, &S::pd_k, "sjd-pac: candidates per tree level, or auto (default)");
  add_count_setting(cmd, o, a, "--pd-depth", 0, &S::pd_depth, "sjd-pac: tree levels, or auto (default)");
  add_setting(cmd, o, a, "--relax", &values_.relax, &S::relax,
              "acceptance: none (lossless) | uniform | cool | lantern -- the last three are LOSSY "
              "(exact where every weight is at most 1: --delta <= 1, with --nu 0 for cool)");
  add_setting(cmd, o, a, "--delta", &values_.delta, &S::delta, "LOSSY uniform/cool relaxation budget (default 2.0)");
  add_setting(cmd, o, a, "--nu", &values_.nu, &S::nu, "LOSSY cool annealing rate (default 0.05)");
  add_setting(cmd, o, a, "--lantern-k", &values_.lantern_k, &S::lantern_k, "LOSSY lantern: neighbours (default 10)");
  add_setting(cmd, o, a, "--lantern-lambda", &values_.lantern_lambda, &S::lantern_lambda,
              "LOSSY lantern: mass cap (default 4.0)");
  // A switch: present turns it on (a config file's false stays false unless the flag is given).
  CLI::Option* own_residual = cmd.add_flag("--lantern-own-residual", values_.lantern_own_residual,
                                           "LOSSY lantern: LANTERN's own residual instead of Cool-SD's (default off)");
  o.push_back(own_residual);
  a.push_back([own_residual](engine::GenerationSettings& s) {
    if (own_residual->count() > 0) s.lantern_own_residual = true;
  });
  add_setting(cmd, o, a, "--cfg", &values_.cfg, &S::cfg, "classifier-free guidance scale (1 = off)");
  add_setting(cmd, o, a, "--negative-prompt", &values_.negative_prompt, &S::negative_prompt,
              "text of the guidance row, steered away from (default, or \"\": the model's own unconditional row; "
              "Emu3: its bundle's negative prompt)");
  add_setting(cmd, o, a, "--temperature", &values_.temperature, &S::temperature, "sampling temperature");
  add_setting(cmd, o, a, "--top-k", &values_.top_k, &S::top_k, "keep the k most likely image tokens (0 = all)");
  add_setting(cmd, o, a, "--seed", &values_.seed, &S::seed, "random seed (reproduces an image exactly)");
  add_setting(cmd, o, a, "--resolution", &values_.resolution, &S::resolution,
              "image side in pixels where the family supports several (0 = the model's own)");
  add_setting(cmd, o, a, "--device", &values_.device, &S::device, "where the transformer runs: cpu | cuda | cuda:K");
  add_setting(cmd, o, a, "--dtype", &values_.dtype, &S::dtype, "transformer weights and KV cache: f32 | bf16");
  add_setting(cmd, o, a, "--cost-profile", &values_.cost_profile, &S::cost_profile,
              "step-cost profile (JSON from `sjd bench --calibrate`) for automatic windows; default: the bundle's");
  add_count_setting(cmd, o, a, "--batch-size", 1, &S::batch_size,
                    "prompts decoded at once, or auto: batch takes 8 on a CPU, 16 on a GPU (less if memory is "
                    "short), generate and compare take 1; automatic windows are planned for it (above 1 from the "
                    "model's acceptance prior alone)");
}

engine::GenerationSettings SettingsFlags::baseline(const nlohmann::json& bundle_defaults,
                                                   const std::string& bundle_where) {
  engine::GenerationSettings s;
  engine::apply_settings(s, bundle_defaults, bundle_where + ": defaults");
  return s;
}

engine::GenerationSettings SettingsFlags::resolve(const nlohmann::json& bundle_defaults,
                                                  const std::string& bundle_where) const {
  engine::GenerationSettings s = baseline(bundle_defaults, bundle_where);
  // Where the device was set, for the error of a device this machine lacks.
  std::string device_from = bundle_defaults.is_object() && bundle_defaults.contains("device")
                                ? bundle_where + ": /defaults/device"
                                : "--device";
  if (!config_.empty()) {
    const nlohmann::json layer = engine::read_json_input(config_, "config file");
    if (layer.is_object() && layer.contains("device")) device_from = config_ + ": /device";
    engine::apply_settings(s, layer, config_);
    // A profile a config file names lies beside it, wherever sjd is run from (as a bundle's files lie in the bundle).
    if (layer.is_object() && layer.contains("cost_profile") && !s.cost_profile.empty() &&
        std::filesystem::path(s.cost_profile).is_relative()) {
      s.cost_profile = (std::filesystem::path(config_).parent_path() / s.cost_profile).string();
    }
  }
  for (const auto& apply : appliers_) apply(s);
  if (given("--device")) device_from = "--device";
  engine::method_from_settings(s);  // validates the combination now, before any work
  engine::placement_from_settings(s, device_from);  // device cuda on a CPU-only build fails here, with exit code 2
  return s;
}

int64_t SettingsFlags::max_memory() const {
  return max_memory_.empty() ? 0 : engine::parse_memory_size(max_memory_);
}

bool SettingsFlags::given(const std::string& flag) const {
  return std::any_of(options_.begin(), options_.end(),
                     [&](const CLI::Option* o) { return o->check_name(flag) && o->count() > 0; });
}

std::string SettingsFlags::origin_of(const std::string& flag, const std::string& key,
                                     const std::string& bundle_where) const {
  if (given(flag)) return flag;
  if (!config_.empty()) {
    const nlohmann::json layer = engine::read_json_input(config_, "config file");
    if (layer.is_object() && layer.contains(key)) return config_ + ": " + key;
  }
  return bundle_where + ": defaults: " + key;
}

std::unique_ptr<text::Tokenizer> load_checked_tokenizer(const engine::Bundle& bundle, int64_t resolution,
                                                        const SettingsFlags& flags) {
  std::unique_ptr<text::Tokenizer> tokenizer = engine::load_bundle_tokenizer(bundle);
  if (resolution != 0) {
    engine::check_resolution_supported(bundle, *tokenizer, resolution,
                                       flags.origin_of("--resolution", "resolution", bundle.json_path.string()));
  }
  return tokenizer;
}

void check_prompt_flag(const std::string& prompt) {
  if (const size_t bad = text::utf8::find_invalid(prompt); bad != std::string::npos) {
    throw engine::InputError("-p: the prompt is not valid UTF-8 at byte " + std::to_string(bad + 1));
  }
  if (text::unicode::is_blank(prompt)) {
    throw engine::InputError("-p: the prompt is blank (it shows nothing)");
  }
}

void print_settings_note(const engine::GenerationSettings& settings, const engine::GenerationSettings& baseline) {
  std::istringstream notes(engine::ignored_settings_note(settings, baseline));
  for (std::string line; std::getline(notes, line);) std::cerr << "sjd: " << line << "\n";
}

void add_trust_code_flag(CLI::App& cmd, bool& trust_code) {
  cmd.add_flag("--trust-code", trust_code,
               "allow TorchScript (.pt/.ts) weights, which run code when loaded; only for bundles you trust");
}

void add_quiet_flag(CLI::App& cmd, bool& quiet) {
  cmd.add_flag("--quiet,-q", quiet, "no progress line on stderr (there is none when stderr is not a terminal)");
}

bool show_progress(bool quiet) { return !quiet && ::isatty(STDERR_FILENO) != 0; }

}  // namespace sjd::app
