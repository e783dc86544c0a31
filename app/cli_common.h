#pragma once
// Flags shared by the subcommands, settings resolution, and the exit-code
// convention: 0 ok, 1 runtime failure, 2 bad input.
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "engine/bundle.h"
#include "engine/settings.h"
#include "text/tokenizer.h"

namespace sjd::app {

// The generation-setting flags. Only flags the user gave override the layers below.
class SettingsFlags {
 public:
  void add_to(CLI::App& command);
  // defaults < bundle defaults < --config < given flags
  engine::GenerationSettings resolve(const nlohmann::json& bundle_defaults, const std::string& bundle_where) const;
  // The settings before the user's config file and flags: built-in defaults and the bundle's.
  static engine::GenerationSettings baseline(const nlohmann::json& bundle_defaults, const std::string& bundle_where);
  // --max-memory in bytes (0: the machine's available memory).
  int64_t max_memory() const;
  bool trust_code() const { return trust_code_; }
  // The --config file ("" when not given).
  const std::string& config_file() const { return config_; }
  // Whether the user gave this flag ("--method") on the command line.
  bool given(const std::string& flag) const;
  // Where a setting came from, for messages: its flag when given, else the --config file's key, else the
  // bundle's defaults.
  std::string origin_of(const std::string& flag, const std::string& key, const std::string& bundle_where) const;

 private:
  engine::GenerationSettings values_;
  std::string config_;
  std::string max_memory_;
  bool trust_code_ = false;
  std::vector<std::function<void(engine::GenerationSettings&)>> appliers_;
  std::vector<CLI::Option*> options_;
};

// Adds an integer flag whose text must be a whole decimal integer of its type: CLI11 alone reads ''
// as 0, "0x10" as 16, and a number past the type's range as the nearest end of it.
template <typename T>
CLI::Option* add_integer_option(CLI::App& command, const std::string& flag, T& value, const std::string& help);

// After `command` is parsed, a flag given an empty value ("--stats ''", an unset shell variable) is
// refused (CLI11 left it as if the flag were absent: no stats written, no config read), except -p,
// whose blank prompt check_prompt_flag names, and positional arguments.
void refuse_empty_values(CLI::App& command);

// A prompt given with -p: refused (InputError) when blank, as a prompt file's blank prompt is, or
// when it is not valid UTF-8 (the byte counted in the prompt, not the family's template around it).
void check_prompt_flag(const std::string& prompt);

// The bundle's tokenizer, for the Generator; a resolution the bundle cannot draw is refused with it,
// before the weights load, naming where the resolution was asked for.
std::unique_ptr<text::Tokenizer> load_checked_tokenizer(const engine::Bundle& bundle, int64_t resolution,
                                                        const SettingsFlags& flags);

// Prints engine::ignored_settings_note (a setting the method ignores) to stderr, if any.
void print_settings_note(const engine::GenerationSettings& settings, const engine::GenerationSettings& baseline);

// Adds --trust-code: TorchScript weights run code when loaded (docs/security.md).
void add_trust_code_flag(CLI::App& command, bool& trust_code);

// Adds --quiet: no progress line.
void add_quiet_flag(CLI::App& command, bool& quiet);
// A progress line is shown on stderr only when it is a terminal and --quiet was not given.
bool show_progress(bool quiet);

// `sjd --version`: version and commit, LibTorch version, CUDA or not (lines, no final newline).
std::string version_text();

void add_generate_command(CLI::App& app);
void add_batch_command(CLI::App& app);
void add_manifest_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_bench_command(CLI::App& app);

}  // namespace sjd::app
