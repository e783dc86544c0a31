// `sjd generate`: one prompt -> one PNG (+ optional stats JSON and step heatmap).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/generator.h"
#include "engine/outputs.h"
#include "engine/progress_line.h"
#include "engine/step_heatmap.h"
#include "io/atomic_file.h"
#include "io/text_renderer.h"

namespace sjd::app {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string output = "out.png";
  std::string stats;
  std::string heatmap;
  std::string heatmap_view = "side";
  bool heatmap_view_given = false;
  std::string tokens;
  bool quiet = false;
  SettingsFlags settings;
};

// What the method's exactness label means for this image.
std::string exactness_remark(decoding::Exactness exactness) {
  switch (exactness) {
    case decoding::Exactness::kExact: return "";
    case decoding::Exactness::kGreedy: return " -- greedy: deterministic argmax decoding, not a sample";
    case decoding::Exactness::kLossy: return " -- lossy: output differs in distribution from ar";
  }
  return "";
}

int run_generate(const GenerateArgs& args) {
  // Outputs are checked (and their folders made) before any work: a bad --stats path
  // fails now, not after the image; -o x.jpg is refused rather than written as PNG.
  check_prompt_flag(args.prompt);
  engine::prepare_output_file(args.output, "-o", ".png");
  // -o replaces a file that is there, as image tools do; the last line of the run says so.
  std::error_code exists_error;
  const bool replacing = std::filesystem::exists(args.output, exists_error);
  std::unique_ptr<io::TextRenderer> text;  // the heatmap's labels; a missing font fails before any work
  const engine::HeatmapView heatmap_view = engine::parse_heatmap_view(args.heatmap_view);
  if (args.heatmap_view_given && args.heatmap.empty()) {
    throw engine::InputError("--heatmap-view draws the map of --heatmap FILE.png: give it too");
  }
  if (!args.heatmap.empty()) {
    engine::prepare_output_file(args.heatmap, "--heatmap", ".png");
    text = io::TextRenderer::system_font();
  }
  if (!args.stats.empty()) engine::prepare_output_file(args.stats, "--stats");
  if (!args.tokens.empty()) engine::prepare_output_file(args.tokens, "--tokens");
  engine::Bundle bundle = engine::load_bundle(args.model);
  bundle.trust_code = args.settings.trust_code();
  const engine::GenerationSettings settings = args.settings.resolve(bundle.defaults, bundle.json_path.string());
  std::unique_ptr<text::Tokenizer> tokenizer = load_checked_tokenizer(bundle, settings.resolution, args.settings);
  engine::check_outputs_apart(
      {{"-o", args.output}, {"--heatmap", args.heatmap}, {"--stats", args.stats}, {"--tokens", args.tokens}},
      {{"--config", args.settings.config_file()}, {"--cost-profile", settings.cost_profile}}, args.model);
  print_settings_note(settings, SettingsFlags::baseline(bundle.defaults, bundle.json_path.string()));
  engine::Generator generator(std::move(bundle), engine::placement_from_settings(settings), std::move(tokenizer));
  generator.set_memory_limit(args.settings.max_memory());
  generator.set_warning_handler([](const std::string& warning) { std::cerr << "sjd: warning: " << warning << "\n"; });
  engine::ProgressLine progress(std::cerr, show_progress(args.quiet));
  const auto start = std::chrono::steady_clock::now();
  std::function<void(const decoding::StepProgress&)> on_step;
  if (progress.enabled()) {
    on_step = [&](const decoding::StepProgress& p) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress.show(engine::decode_progress_text(p, elapsed), p.tokens_done == p.tokens_total);
    };
  }
  const engine::GenerationOutput out = generator.generate(args.prompt, settings, 0, on_step);
  progress.finish();
  // The image is put in place last: if another output cannot be written, the run fails leaving the -o file
  // that was there (a --stats on a full disk had already replaced it).
  engine::StagedImage image = engine::stage_image(args.output, out, args.prompt, generator.bundle().name);
  const double write_seconds = image.seconds;
  const nlohmann::json stats =
      engine::stats_json(out, write_seconds,
                         {args.prompt, generator.bundle().name, generator.bundle().dir, args.output});
  if (!args.stats.empty()) io::write_file_atomic(args.stats, stats.dump(2) + "\n");
  if (!args.heatmap.empty()) {
    engine::write_step_heatmap(args.heatmap, out, args.prompt, generator.family(settings.resolution).layout(),
                               heatmap_view, *text);
  }
  if (!args.tokens.empty()) io::write_file_atomic(args.tokens, nlohmann::json(out.tokens).dump() + "\n");
  image.file->commit();
  std::cout << "wrote " << args.output << " (" << out.image.size(1) << "x" << out.image.size(0)
            << (replacing ? ", replacing the file that was there" : "") << ")\n"
            << "method " << out.method.describe() << exactness_remark(out.method.exactness()) << "\n"
            << "tokens " << out.stats.tokens << ", steps " << out.stats.steps << ", step compression "
            << stats["step_compression"].get<double>() << "\n"
            << "seconds: total " << stats["seconds"]["total"].get<double>() << " (prefill "
            << out.stats.prefill_seconds << ", forward " << out.stats.forward_seconds << ", pipeline "
            << out.stats.pipeline_seconds << ", verify " << out.stats.verify_seconds << ", vq " << out.vq_seconds
            << ", write " << write_seconds << ")\n";
  std::string also;
  for (const auto& [file, what] :
       {std::pair{args.stats, "stats"}, {args.heatmap, "step heatmap"}, {args.tokens, "tokens"}}) {
    if (!file.empty()) also += (also.empty() ? "" : ", ") + file + " (" + what + ")";
  }
  if (!also.empty()) std::cout << "also wrote " << also << "\n";
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate one image from a text prompt");
  cmd->add_option("--model,-m", args->model, "model bundle directory (holds bundle.json)")->required();
  cmd->add_option("--prompt,-p", args->prompt, "text prompt")->required();
  cmd->add_option("--output,-o", args->output, "PNG to write (atomically)")->capture_default_str();
  cmd->add_option("--stats", args->stats, "write steps, step compression and latency breakdown as JSON");
  cmd->add_option("--heatmap", args->heatmap,
                  "write the step that committed each token as a PNG, with a colour bar in steps");
  CLI::Option* view =
      cmd->add_option("--heatmap-view", args->heatmap_view,
                      "side (the image and the map side by side) | blend (the map over the image) | map")
          ->capture_default_str();
  add_quiet_flag(*cmd, args->quiet);
  cmd->add_option("--tokens", args->tokens, "write the generated token ids as JSON");
  args->settings.add_to(*cmd);
  cmd->callback([args, view]() {
    args->heatmap_view_given = view->count() > 0;
    command_exit_code() = run_guarded([&] { return run_generate(*args); });
  });
}

}  // namespace sjd::app
