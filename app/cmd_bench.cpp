// `sjd bench`: timings of a full-size architecture with random weights on the
// device (docs/gpu.md, docs/benchmarks.md). Prints figures; --json keeps them.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.h"
#include "engine/bench.h"
#include "engine/bundle.h"
#include "io/atomic_file.h"

namespace sjd::app {
namespace {

struct BenchArgs {
  std::string preset = "tiny";
  std::string device = "cpu";
  std::string dtype = "bf16";
  std::string windows = "16,32,64";
  int iterations = 5;
  int warmup = 2;
  uint64_t seed = 0;
  bool no_vq = false;
  std::string json;
};

std::vector<int> parse_windows(const std::string& text) {
  std::vector<int> windows;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    try {
      size_t used = 0;
      const int w = std::stoi(part, &used);
      if (used != part.size() || w < 1) throw std::invalid_argument(part);
      windows.push_back(w);
    } catch (const std::exception&) {
      throw engine::InputError("--windows: '" + part + "' is not a window size >= 1");
    }
  }
  if (windows.empty()) throw engine::InputError("--windows: no window size given");
  return windows;
}

int run_bench_command(const BenchArgs& args) {
  engine::BenchOptions options;
  options.preset = args.preset;
  options.placement = engine::parse_placement(args.device, args.dtype);
  options.windows = parse_windows(args.windows);
  if (args.iterations < 1 || args.warmup < 0) throw engine::InputError("--iterations must be >= 1 and --warmup >= 0");
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.seed = args.seed;
  options.vq = !args.no_vq;
  engine::bench_preset(args.preset);  // an unknown preset fails before any allocation
  const engine::BenchReport report = engine::run_bench(options);
  std::cout << engine::format_report(report);
  if (!args.json.empty()) io::write_file_atomic(args.json, engine::to_json(report).dump(2) + "\n");
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "time a full-size architecture with random weights (ms per step, GB/s, s per image)");
  cmd->add_option("--preset", args->preset, "lumina-7b-768 | emu3-8b-720 | llamagen-xl-512 | tiny")->capture_default_str();
  cmd->add_option("--device", args->device, "cpu | cuda")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "f32 | bf16")->capture_default_str();
  cmd->add_option("--windows", args->windows, "window sizes L to time, comma-separated")->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "timed repetitions of each step")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed repetitions first")->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the random weights and drafts")->capture_default_str();
  cmd->add_flag("--no-vq", args->no_vq, "skip the VQ decoder stand-in");
  cmd->add_option("--json", args->json, "also write the figures as JSON");
  cmd->callback([args]() { command_exit_code() = run_guarded([&] { return run_bench_command(*args); }); });
}

}  // namespace sjd::app
