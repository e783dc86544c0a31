// `sjd bench`: timings of a full-size architecture with random weights on the
// device (docs/gpu.md, docs/benchmarks.md). Prints figures; --json keeps them.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/bench.h"
#include "engine/bundle.h"
#include "engine/calibrate.h"
#include "engine/cost_profiles.h"
#include "engine/outputs.h"
#include "io/atomic_file.h"
#include "io/input_files.h"

namespace sjd::app {
namespace {

struct BenchArgs {
  std::string preset = "tiny";
  std::string device = "cpu";
  std::string dtype;  // "": bf16 for the presets, the bundle's setting (f32 unless it says) for --calibrate
  std::string windows = "16,32,64";
  std::string batch_sizes;  // "": 1,4,16 for the presets, 1,2,4,8,16 for --calibrate
  int iterations = 5;
  int warmup = 2;
  uint64_t seed = 0;
  bool no_vq = false;
  std::string json;
  std::string profile;  // a folder for Kineto traces of the AR, widest window and tree steps
  // --calibrate: the step-cost profile of a real bundle
  bool calibrate = false;
  std::string model;
  std::string out;
  bool into_bundle = false;
  std::vector<std::string> given;  // the flags on the command line
};

// Flags of one mode given in the other are refused rather than ignored.
void check_mode_flags(const BenchArgs& args) {
  const auto listed = [&](const std::vector<std::string>& flags) {
    std::string list;
    for (const std::string& flag : flags) {
      if (std::find(args.given.begin(), args.given.end(), flag) != args.given.end())
        list += (list.empty() ? "" : ", ") + flag;
    }
    return list;
  };
  if (!args.calibrate) {
    if (const std::string l = listed({"--model", "--out", "--into-bundle"}); !l.empty()) {
      throw engine::InputError(l + ": for --calibrate (the presets take none)");
    }
    return;
  }
  if (const std::string l = listed({"--preset", "--windows", "--seed", "--no-vq", "--json", "--profile"}); !l.empty()) {
    throw engine::InputError(l + ": for the presets; --calibrate times the bundle's own model at its window sizes "
                             "and keeps the profile with --out or --into-bundle");
  }
}

// "16,32,64" -> sizes >= 1; `flag` names the option in errors.
std::vector<int> parse_sizes(const std::string& text, const std::string& flag) {
  std::vector<int> windows;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    try {
      size_t used = 0;
      const int w = std::stoi(part, &used);
      if (used != part.size() || w < 1) throw std::invalid_argument(part);
      windows.push_back(w);
    } catch (const std::exception&) {
      throw engine::InputError(flag + ": '" + part + "' is not a size >= 1");
    }
  }
  if (windows.empty()) throw engine::InputError(flag + ": no size given");
  return windows;
}

// Measures the bundle's step cost and prints the curve; --out / --into-bundle keep it.
int run_calibrate(const BenchArgs& args) {
  if (args.model.empty()) throw engine::InputError("--calibrate needs --model DIR");
  engine::Bundle bundle = engine::load_bundle(args.model);
  engine::GenerationSettings settings;
  engine::apply_settings(settings, bundle.defaults, bundle.json_path.string() + ": defaults");
  settings.device = args.device;
  if (!args.dtype.empty()) settings.dtype = args.dtype;
  const std::filesystem::path json_path = bundle.json_path;
  if (args.into_bundle) {  // what would stop the write is found before minutes of timing, not after
    engine::bundle_cost_profiles(bundle);
    try {
      io::check_output_path(json_path);
    } catch (const io::FileError& e) {
      throw engine::InputError(std::string("--into-bundle: ") + e.what());
    }
  }
  if (args.out.empty() && !args.into_bundle) {
    std::cerr << "sjd: the profile will be printed, not kept (--out FILE or --into-bundle keep it)\n";
  }
  engine::Generator generator(std::move(bundle), engine::placement_from_settings(settings));
  engine::CalibrateOptions options;
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.batch_sizes = parse_sizes(args.batch_sizes.empty() ? "1,2,4,8,16" : args.batch_sizes, "--batch-sizes");
  options.on_curve = [&](int batch, int index, int count) {
    std::cerr << "sjd: timing batch size " << batch << " (" << index + 1 << " of " << count << "), "
              << options.tokens.size() << " window sizes x " << options.warmup + options.iterations << " forwards\n";
  };
  const decoding::StepCostProfile profile = engine::calibrate_step_cost(generator, settings, options);
  std::cout << "step-cost profile: " << profile.name() << " (mid-image, fastest of " << options.iterations << ")\n";
  for (const decoding::StepCostCurve& curve : profile.curves()) {
    std::cout << curve.rows << " rows\ntokens per row    ms per step    ms per token and row\n";
    for (const auto& [tokens, ms] : curve.points) {
      std::printf("%14d %14.3f %22.4f\n", tokens, ms, ms / (tokens * curve.rows));
    }
  }
  if (!args.out.empty()) {
    io::write_file_atomic(args.out, profile.to_json().dump(2) + "\n");
    std::cout << "wrote the profile to " << args.out << " (for --cost-profile)\n";
  }
  if (args.into_bundle) {
    // Read again: an edit made to the bundle while the calibration ran is kept, not written over.
    nlohmann::json updated = engine::read_json_input(json_path, "bundle.json");
    if (!updated.is_object() || (updated.contains("step_cost") && !updated["step_cost"].is_object())) {
      throw engine::InputError(json_path.string() + " was changed while the calibration ran and has no \"step_cost\" "
                               "object to take the profile (printed above; --out FILE keeps one)");
    }
    updated["step_cost"][engine::cost_profile_key(settings.device, settings.dtype)] = profile.to_json();
    io::write_file_atomic(json_path, updated.dump(2) + "\n");
    std::cout << "wrote the profile into " << json_path.string() << "\n";
  }
  return 0;
}

int run_bench_command(const BenchArgs& args) {
  check_mode_flags(args);
  // Outputs are checked before minutes of timing, not after.
  if (!args.json.empty()) engine::prepare_output_file(args.json, "--json", ".json");
  if (!args.out.empty()) engine::prepare_output_file(args.out, "--out", ".json");
  engine::check_outputs_apart({{"--json", args.json}, {"--out", args.out}}, {}, args.calibrate ? args.model : "");
  // Bounded so that a slip of the keyboard (--iterations 50000000) does not hold the machine for days.
  if (args.iterations < 1 || args.iterations > 10000 || args.warmup < 0 || args.warmup > 1000) {
    throw engine::InputError("--iterations must be from 1 to 10000 and --warmup from 0 to 1000 (got " +
                             std::to_string(args.iterations) + " and " + std::to_string(args.warmup) + ")");
  }
  // On a GPU a shape's first forward captures its graph (and cuDNN plans its attention): untimed, always.
  if (args.warmup < 1 && args.device.rfind("cuda", 0) == 0) throw engine::InputError("--warmup must be >= 1 on a GPU");
  if (args.calibrate) return run_calibrate(args);
  engine::BenchOptions options;
  options.preset = args.preset;
  options.placement = engine::parse_placement(args.device, args.dtype.empty() ? "bf16" : args.dtype);
  options.windows = parse_sizes(args.windows, "--windows");
  options.batch_sizes = parse_sizes(args.batch_sizes.empty() ? "1,4,16" : args.batch_sizes, "--batch-sizes");
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.seed = args.seed;
  options.vq = !args.no_vq;
  // An unknown preset, a window past the fixture or memory past the device fail before any allocation.
  const engine::BenchPreset preset = engine::bench_preset(args.preset);
  engine::check_bench_options(options, preset);
  // A 7-8B preset takes minutes to make its weights, and longer on a CPU: say what is coming.
  std::cerr << "bench: " << preset.name << " in " << engine::dtype_name(options.placement.dtype) << " on "
            << engine::device_name(options.placement.device) << ", about "
            << engine::format_bytes(engine::bench_memory(options, preset).bytes) << " at its largest; making "
            << preset.name << "'s weights, then timing its steps\n";
  if (!args.profile.empty()) {
    try {  // made as every output folder is: removed again, when left empty, by a failure or Ctrl-C
      engine::prepare_output_dir(args.profile);
    } catch (const std::runtime_error& error) {  // InputError, or io::FileError for a folder it cannot write
      throw engine::InputError("--profile " + std::string(error.what()));
    }
    options.profile_dir = args.profile;
  }
  const auto write_json = [&](const engine::BenchReport& report) {
    if (!args.json.empty()) io::write_file_atomic(args.json, engine::to_json(report).dump(2) + "\n");
  };
  if (!options.profile_dir.empty()) options.figures_ready = write_json;  // kept if a profile never returns
  const engine::BenchReport report = engine::run_bench(options);
  std::cout << engine::format_report(report);
  write_json(report);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "time a full-size architecture with random weights (ms per step, GB/s, s per image)");
  cmd->add_option("--preset", args->preset, "lumina-7b-768 | emu3-8b-720 | llamagen-xl-512 | tiny")
      ->capture_default_str();
  cmd->add_option("--device", args->device, "cpu | cuda")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "f32 | bf16 (default: bf16 for presets; the bundle's for --calibrate)");
  cmd->add_option("--windows", args->windows, "window sizes L to time, comma-separated")->capture_default_str();
  cmd->add_option("--batch-sizes", args->batch_sizes,
                  "the batch axis: prompts per forward to time (each with its CFG pair), comma-separated "
                  "(default: 1,4,16; --calibrate: 1,2,4,8,16, one cost curve each)");
  add_integer_option(*cmd, "--iterations", args->iterations,
                     "timed repetitions of each step and of the prefill (1 to 10000)")
      ->capture_default_str();
  add_integer_option(*cmd, "--warmup", args->warmup, "untimed repetitions first (0 to 1000)")->capture_default_str();
  add_integer_option(*cmd, "--seed", args->seed, "seed of the random weights and drafts")->capture_default_str();
  cmd->add_flag("--no-vq", args->no_vq, "skip the VQ decoder stand-in");
  cmd->add_option("--json", args->json, "also write the figures as JSON");
  cmd->add_option("--profile", args->profile,
                  "also profile the AR, widest window and tree steps (3 each): Chrome traces in this folder and "
                  "the largest kernels per step (on a CPU: ATen operators)");
  cmd->add_flag("--calibrate", args->calibrate,
                "measure a bundle's step cost per window size (the profile automatic windows read)");
  cmd->add_option("--model", args->model, "--calibrate: the bundle directory");
  cmd->add_option("--out", args->out, "--calibrate: write the profile to this JSON file (for --cost-profile)");
  cmd->add_flag("--into-bundle", args->into_bundle, "--calibrate: store the profile in the bundle's bundle.json");
  cmd->callback([args, cmd]() {
    for (const CLI::Option* option : cmd->get_options()) {
      if (option->count() > 0) args->given.push_back(option->get_name());
    }
    command_exit_code() = run_guarded([&] { return run_bench_command(*args); });
  });
}

}  // namespace sjd::app
