// `sjd batch`: every prompt of a prompt file -> a PNG each, manifest.jsonl, resumable.
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/batch.h"
#include "engine/outputs.h"
#include "io/prompt_file.h"
#include "stop_signals.h"

namespace sjd::app {
namespace {

struct BatchArgs {
  std::string model;
  std::string prompts;
  std::string out_dir;
  int64_t limit = 0;
  bool quiet = false;
  std::string shard;        // "I/N"; empty: from a Slurm array or Kubernetes Indexed Job, else unsharded
  int64_t shard_count = 0;  // the shard count of a Kubernetes Indexed Job
  int64_t claim_timeout = engine::BatchOptions().claim_timeout_seconds;
  SettingsFlags settings;
};

// The summary names the manifest this process appends to; a shard with no image of its own to make writes none.
std::string manifest_said(const std::filesystem::path& manifest) {
  if (!std::filesystem::exists(manifest)) return "; no manifest written (no image was this run's to make)";
  return "; manifest " + manifest.string();
}

int run_batch_command(const BatchArgs& args) {
  engine::Bundle bundle = engine::load_bundle(args.model);
  bundle.trust_code = args.settings.trust_code();
  engine::BatchOptions options;
  options.settings = args.settings.resolve(bundle.defaults, bundle.json_path.string());
  std::unique_ptr<text::Tokenizer> tokenizer =
      load_checked_tokenizer(bundle, options.settings.resolution, args.settings);
  print_settings_note(options.settings, SettingsFlags::baseline(bundle.defaults, bundle.json_path.string()));
  options.prompts = args.prompts;
  options.out_dir = args.out_dir;
  options.limit = args.limit;
  options.shard = engine::choose_shard(
      args.shard, args.shard_count, [](const char* name) { return std::getenv(name); }, std::cerr);
  options.progress = show_progress(args.quiet);
  if (args.limit < 0) throw engine::InputError("--limit must not be negative (0 = every prompt)");
  // Owners touch their claims every 20 s; past a week the clock arithmetic in nanoseconds would overflow.
  if (args.claim_timeout < 60 || args.claim_timeout > 7 * 24 * 3600) {
    throw engine::InputError("--claim-timeout must be in [60, 604800] seconds (got " +
                             std::to_string(args.claim_timeout) + ")");
  }
  options.claim_timeout_seconds = args.claim_timeout;
  const std::string unread = engine::prompt_file_settings_warning(io::read_prompts(options.prompts),  // a bad prompt
                                                                   options.prompts.string());  // file fails now
  if (!unread.empty()) std::cerr << "sjd: warning: " << unread << "\n";
  engine::check_run_folder(options.out_dir, engine::RunFolder::kBatch);
  engine::check_run_folder_apart(options.out_dir, {engine::manifest_name(options.shard), "batch.json"},
                                 options.out_dir,
                                 {{"--prompts", options.prompts},
                                  {"--config", args.settings.config_file()},
                                  {"--cost-profile", options.settings.cost_profile}},
                                 args.model);
  engine::Generator generator(std::move(bundle), engine::placement_from_settings(options.settings),
                              std::move(tokenizer));
  generator.set_memory_limit(args.settings.max_memory());
  install_stop_signals();  // from here a Ctrl-C lets the images in flight finish (stop_signals.h)
  options.stop_requested = stop_signal;
  const engine::BatchSummary s = engine::run_batch(generator, options, std::cerr);
  std::cout << "batch: " << s.generated << " generated, " << s.skipped << " already done, " << s.failed
            << " failed" << (s.elsewhere > 0 ? ", " + std::to_string(s.elsewhere) + " made by another process" : "")
            << manifest_said(options.out_dir / engine::manifest_name(options.shard)) << "\n";
  if (s.generated > 0) {
    std::cout << "batch: " << std::fixed << std::setprecision(1) << s.seconds << " s in all, "
              << std::setprecision(2) << s.seconds / static_cast<double>(s.generated) << " s per image ("
              << static_cast<double>(s.generated) / s.seconds << " images/s) at batch size " << s.batch_size
              << (s.generated < s.batch_size
                      ? " (" + std::to_string(s.generated) + (s.generated == 1 ? " image)" : " images)")
                      : "")
              << ", mean step compression " << s.compression_sum / static_cast<double>(s.generated) << "x\n"
              << "batch: method " << s.method << "\n";
  }
  if (s.stopped_by != 0) {
    std::cout << "batch: stopped by " << stop_signal_name(s.stopped_by) << " with " << s.left
              << " image(s) left; the same command resumes\n";
  }
  // Ends the process by a stop signal, also one that came during the last images (all of them made):
  // a script's loop stops either way.
  end_by_stop_signal();
  return s.failed > 0 ? 1 : 0;
}

}  // namespace

void add_batch_command(CLI::App& app) {
  auto args = std::make_shared<BatchArgs>();
  CLI::App* cmd = app.add_subcommand("batch", "generate an image for every prompt of a file (resumable)");
  cmd->add_option("--model,-m", args->model, "model bundle directory (holds bundle.json)")->required();
  cmd->add_option("--prompts", args->prompts,
                  "prompt file: .txt (one per line), .tsv/.csv with a Prompt column, .jsonl with a prompt field")
      ->required();
  cmd->add_option("--out-dir", args->out_dir, "output folder (PNGs + manifest.jsonl)")->required();
  add_integer_option(*cmd, "--limit", args->limit, "only the first N prompts (0 = all)");
  cmd->add_option("--shard", args->shard,
                  "I/N: only the prompts whose index i has i mod N == I (default: from a Slurm job array or "
                  "a Kubernetes Indexed Job, else all)");
  add_integer_option(*cmd, "--shard-count", args->shard_count,
                  "shard count of a Kubernetes Indexed Job (its completions; or env SJD_SHARD_COUNT); "
                  "with --shard I/N it must be N")
      // 0 is the value of a flag not given (args.shard_count), so a given 0 would run every prompt without a word.
      ->check([](const std::string& text) {
        int64_t value = 1;  // text that is no integer is integer_text_problem's to name
        std::from_chars(text.data(), text.data() + text.size(), value);
        return value == 0 ? "must be positive (got " + text + ")" : std::string();
      });
  add_integer_option(*cmd, "--claim-timeout", args->claim_timeout,
                     "seconds another process's claim on an image may go untouched before this one takes the image "
                     "over (60..604800; owners touch theirs every 20 s); give every process of a folder the same")
      ->capture_default_str();
  add_quiet_flag(*cmd, args->quiet);
  args->settings.add_to(*cmd);
  cmd->callback([args]() { command_exit_code() = run_guarded([&] { return run_batch_command(*args); }); });
}

}  // namespace sjd::app
