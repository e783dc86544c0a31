// `sjd compare`: several methods on the same prompts and seeds, side by side.
#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/compare.h"
#include "engine/compare_figure.h"
#include "engine/outputs.h"
#include "io/atomic_file.h"
#include "io/png_writer.h"
#include "io/prompt_file.h"
#include "io/text_renderer.h"
#include "stop_signals.h"

namespace sjd::app {
namespace {

struct CompareArgs {
  std::string model;
  std::string prompt;
  bool prompt_given = false;  // -p "" is a blank prompt, refused; no -p at all asks for --prompts
  std::string prompts_file;
  int64_t limit = 0;
  std::string methods = "ar,sjd,scd-mc,scd-gs,sjd-pac";
  int seeds = 1;
  std::string out_dir = "compare_out";
  bool quiet = false;
  SettingsFlags settings;
};

// --methods "ar, sjd" -> {"ar", "sjd"}: spaces around the names are dropped. An empty entry ("ar,", "ar,,sjd")
// is refused: a method left out of a comparison by a stray comma would pass unseen.
std::vector<std::string> split_methods(const std::string& text) {
  std::vector<std::string> parts;
  if (text.find_first_not_of(" \t") == std::string::npos) return parts;
  for (size_t start = 0;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, comma - start);
    const size_t first = part.find_first_not_of(" \t");
    if (first == std::string::npos) {
      throw engine::InputError("--methods '" + text + "': entry " + std::to_string(parts.size() + 1) +
                               " is empty (a stray comma?)");
    }
    parts.push_back(part.substr(first, part.find_last_not_of(" \t") - first + 1));
    if (comma == text.size()) return parts;
    start = comma + 1;
  }
}

// The --methods entries, each checked: a bad name fails naming its entry, and a method listed twice
// (an alias such as pac-ac or sjd:none is the same method) is refused, since the same seeds would
// make the same images twice.
std::vector<std::string> checked_methods(const std::string& text, const engine::GenerationSettings& base) {
  const std::vector<std::string> methods = split_methods(text);
  if (methods.empty()) throw engine::InputError("--methods: no method given");
  std::vector<std::string> canonical;
  for (const std::string& entry : methods) {
    engine::GenerationSettings s;
    try {
      s = engine::compare_settings(base, entry);  // bad names fail here
    } catch (const std::invalid_argument& e) {  // "unknown relaxation ''" alone did not say where it came from
      throw engine::InputError("--methods entry '" + entry + "': " + e.what());
    }
    canonical.push_back(engine::method_from_settings(s).name + (s.relax == "none" ? "" : ":" + s.relax));
    const auto earlier = std::find(canonical.begin(), canonical.end() - 1, canonical.back());
    if (earlier != canonical.end() - 1) {
      const std::string& first = methods[static_cast<size_t>(earlier - canonical.begin())];
      throw engine::InputError("--methods lists " + canonical.back() + " twice" +
                               (first == entry ? std::string() : " (as " + first + " and " + entry + ")"));
    }
  }
  return methods;
}

// -p's prompt, then the first --limit prompts of --prompts FILE (every one when --limit is 0).
std::vector<std::string> compare_prompts(const CompareArgs& args) {
  std::vector<std::string> prompts;
  if (args.prompt_given) {
    check_prompt_flag(args.prompt);
    prompts.push_back(args.prompt);
  }
  if (!args.prompts_file.empty()) {
    const std::vector<io::PromptEntry> entries = io::read_prompts(args.prompts_file);
    const std::string unread = engine::prompt_file_settings_warning(entries, args.prompts_file);
    if (!unread.empty()) std::cerr << "sjd: warning: " << unread << "\n";
    for (const auto& entry : entries) {
      if (args.limit > 0 && static_cast<int64_t>(prompts.size()) >= args.limit) break;
      if (const std::string problem = io::prompt_text_problem(entry.prompt); !problem.empty()) {
        throw engine::InputError(args.prompts_file + ":" + std::to_string(entry.line) + ": " + problem);
      }
      prompts.push_back(entry.prompt);
    }
  }
  if (prompts.empty()) throw engine::InputError("give a prompt with -p or a prompt file with --prompts");
  return prompts;
}

// Every run keeps its row (and its accepted lengths) in memory for the table: 200,000 prompts x 1000 seeds x
// 6 methods ran out of memory. A comparison that large is a batch per method.
void check_run_count(const engine::CompareOptions& options) {
  constexpr int64_t kMaxRuns = 1000000;
  const int64_t runs = static_cast<int64_t>(options.prompts.size()) * options.seeds *
                       static_cast<int64_t>(options.methods.size());
  if (runs > kMaxRuns) {
    throw engine::InputError(std::to_string(options.prompts.size()) + " prompts x " + std::to_string(options.seeds) +
                             " seeds x " + std::to_string(options.methods.size()) + " methods are " +
                             std::to_string(runs) + " runs, more than compare holds (" + std::to_string(kMaxRuns) +
                             "): use --limit or fewer --seeds, or sjd batch per method");
  }
}

int run_compare_command(const CompareArgs& args) {
  if (args.settings.given("--relax")) {
    throw engine::InputError("compare takes each method's relaxation from its --methods entry (e.g. --methods "
                             "sjd-pac,sjd-pac:cool), not from --relax");
  }
  engine::Bundle bundle = engine::load_bundle(args.model);
  bundle.trust_code = args.settings.trust_code();
  engine::CompareOptions options;
  options.base = args.settings.resolve(bundle.defaults, bundle.json_path.string());
  std::unique_ptr<text::Tokenizer> tokenizer = load_checked_tokenizer(bundle, options.base.resolution, args.settings);
  options.methods = checked_methods(args.methods, options.base);
  options.seeds = args.seeds;
  if (args.seeds < 1 || args.seeds > 1000) throw engine::InputError("--seeds must be in [1, 1000]");
  if (options.base.seed > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(args.seeds - 1)) {
    throw engine::InputError("--seed " + std::to_string(options.base.seed) + " with --seeds " +
                             std::to_string(args.seeds) + " would pass 2^64 - 1 (the seeds would wrap to 0)");
  }
  if (args.limit < 0) throw engine::InputError("--limit must not be negative (0 = every prompt)");
  if (args.limit > 0 && args.prompts_file.empty())
    throw engine::InputError("--limit N takes the first N of --prompts FILE");
  if (args.settings.given("--method")) {
    std::cerr << "sjd: note: compare runs the methods of --methods, so --method " << options.base.method
              << " is ignored\n";
  }
  if (options.base.relax != "none") {  // from a config file's method entry or relax key
    std::cerr << "sjd: note: compare takes each method's relaxation from its --methods entry, so relax "
              << options.base.relax << " is ignored\n";
  }
  const engine::GenerationSettings baseline = SettingsFlags::baseline(bundle.defaults, bundle.json_path.string());
  for (const auto& m : options.methods) {  // bad names fail before any work
    print_settings_note(engine::compare_settings(options.base, m), engine::compare_settings(baseline, m));
  }
  options.prompts = compare_prompts(args);
  check_run_count(options);
  const std::unique_ptr<io::TextRenderer> text = io::TextRenderer::system_font();  // a missing font fails now
  engine::check_run_folder(args.out_dir, engine::RunFolder::kCompare);
  engine::check_run_folder_apart(args.out_dir, {"compare.json", "compare.png", "runs/manifest.jsonl"},
                                 std::filesystem::path(args.out_dir) / "runs",
                                 {{"--prompts", args.prompts_file},
                                  {"--config", args.settings.config_file()},
                                  {"--cost-profile", options.base.cost_profile}},
                                 args.model);
  engine::prepare_output_dir(args.out_dir);
  // The table and figure are written after every run: a link or FIFO there was found only then.
  const std::filesystem::path out_dir = args.out_dir;
  engine::prepare_output_file(out_dir / "compare.json", "--out-dir's compare.json", ".json");
  engine::prepare_output_file(out_dir / "compare.png", "--out-dir's compare.png", ".png");
  options.out_dir = args.out_dir;
  options.progress = show_progress(args.quiet);
  engine::Generator generator(std::move(bundle), engine::placement_from_settings(options.base), std::move(tokenizer));
  generator.set_memory_limit(args.settings.max_memory());
  install_stop_signals();  // from here a Ctrl-C lets the runs in flight finish (stop_signals.h)
  options.stop_requested = stop_signal;
  const engine::CompareReport report = engine::run_compare(generator, options, std::cerr);
  if (report.stopped_by != 0) {
    std::cout << "compare: stopped by " << stop_signal_name(report.stopped_by) << " with "
              << report.resumed + report.made << " of " << report.runs.size()
              << " runs made; the same command makes the rest and writes the table and figure"
              << (std::filesystem::exists(options.out_dir / "compare.json")
                      ? " (the compare.json and compare.png there are an earlier run's)"
                      : "")
              << "\n";
    end_by_stop_signal();
    return 128 + report.stopped_by;  // not reached: the signal ends the process
  }
  const std::filesystem::path json = options.out_dir / "compare.json";
  const std::filesystem::path figure = options.out_dir / "compare.png";
  io::write_file_atomic(json, engine::to_json(report, options).dump(2) + "\n");
  io::write_png(figure, engine::draw_compare_figure(report, options, *text).image,
                {{"description", "rows: prompt x seed; columns: " + args.methods}, {"Software", "sjd compare"}});
  std::cout << engine::format_table(report);
  if (report.resumed > 0) {
    std::cout << report.resumed << " of " << report.runs.size() << " runs were already done in " << args.out_dir
              << " (their recorded figures are used)\n";
  }
  std::cout << "wrote " << json.string() << " and " << figure.string() << "; " << report.made << " of the "
            << report.runs.size() << " images in " << (options.out_dir / "runs").string() << " made now\n";
  end_by_stop_signal();  // a stop that came during the last runs: all made, and a script still stops
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "run several decoding methods on the same prompts and seeds");
  cmd->add_option("--model,-m", args->model, "model bundle directory (holds bundle.json)")->required();
  CLI::Option* prompt = cmd->add_option("--prompt,-p", args->prompt, "text prompt");
  cmd->add_option("--prompts", args->prompts_file, "prompt file (.txt, .tsv/.csv with a Prompt column, .jsonl)")
      ->excludes(prompt);
  add_integer_option(*cmd, "--limit", args->limit, "with --prompts: only the first N prompts (0 = all)");
  cmd->add_option("--methods", args->methods,
                  "comma-separated methods; name:relaxation adds a lossy variant (e.g. sjd-pac:cool)")
      ->capture_default_str();
  add_integer_option(*cmd, "--seeds", args->seeds, "seeds per prompt (from --seed on)")->capture_default_str();
  cmd->add_option("--out-dir", args->out_dir,
                  "where compare.json, compare.png and runs/ (an image per run) go; re-running resumes")
      ->capture_default_str();
  add_quiet_flag(*cmd, args->quiet);
  args->settings.add_to(*cmd);
  // Kept so that a config or a habit gets its note or refusal, but out of the help: --methods names the methods
  // and their relaxations.
  for (const char* unused : {"--method", "--relax"}) cmd->get_option(unused)->group("");
  cmd->callback([args, prompt]() {
    args->prompt_given = prompt->count() > 0;
    command_exit_code() = run_guarded([&] { return run_compare_command(*args); });
  });
}

}  // namespace sjd::app
