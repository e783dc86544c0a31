// `sjd bench --preset tiny` runs on the CPU and prints every figure the GPU
// run reports (no timing is asserted), and the --device / --dtype settings are
// checked before any work: bad values and CUDA on a CPU-only build are exit code 2.
#include <catch2/catch.hpp>

#include <limits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "engine/bench.h"
#include "engine/device.h"
#include "testing/test_support.h"

using namespace sjd::testing;

TEST_CASE("bench: the tiny preset runs on the CPU and prints every figure", "[cli][bench]") {
  TempDir dir("bench");
  const auto json = dir / "bench.json";
  const auto r = run_sjd("bench --preset tiny --device cpu --dtype f32 --iterations 1 --warmup 0 --json '" +
                         json.string() + "'");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* field : {"preset: tiny", "copy bandwidth:", "weight-read bandwidth (AR forward):", "prefill:",
                            "ar step", "window L=16", "window L=32", "window L=64", "forward ", "pipeline ",
                            "verify ", "kv ", "vq decode:", "peak host RSS:", "seconds per image", "sjd-pac",
                            "compression 4.5x", "weights checksum:", "auto window at batch 1", "tree L=64 K=4 D=3",
                            "attention: cpu math path", "png write:"}) {
    CHECK_THAT(r.out, Catch::Contains(field));
  }
  const auto j = nlohmann::json::parse(read_file(json));
  CHECK(j["preset"] == "tiny");
  CHECK(j["window_steps"].size() == 3);
  CHECK(j["window_steps"][2]["nodes"] == 64);
  // SJD-PAC's tree window: the spine of 64 and 3 + 15 + 63 other candidates at depths 1, 2, 3 (K = 4).
  CHECK(j["tree_step"]["window"] == 64);
  CHECK(j["tree_step"]["nodes"] == 64 + 81);
  CHECK(j["tree_step"]["forward_ms"].get<double>() > 0.0);
  CHECK(j["seconds_per_image"].size() == 4);
  // The auto mode's pick from these step times: a window the planner may choose, the profile it read.
  CHECK(j["auto_window_chain"].get<int>() >= 0);
  CHECK(j["auto_window_chain"].get<int>() <= 64);
  REQUIRE(j["step_cost"]["curves"].size() == 1);  // measured with the CFG pair of one prompt
  CHECK(j["step_cost"]["curves"][0]["points"].size() == 4);  // the AR step and three windows
  // The batch axis (default 1, 4, 16): a forward time and tokens/s per batch size.
  REQUIRE(j["batches"].size() == 3);
  CHECK(j["batches"][2]["batch"] == 16);
  for (const auto& b : j["batches"]) {
    CHECK(b["ar_ms"].get<double>() > 0.0);
    CHECK(b["ar_tokens_per_s"].get<double>() == Approx(1e3 * b["batch"].get<double>() / b["ar_ms"].get<double>()));
  }
  CHECK_THAT(r.out, Catch::Contains("batch axis"));
  for (const auto& step : j["window_steps"]) {
    const double parts = step["forward_ms"].get<double>() + step["pipeline_ms"].get<double>() +
                         step["verify_ms"].get<double>() + step["kv_ms"].get<double>();
    CHECK(step["total_ms"].get<double>() == Approx(parts));
    CHECK(step["forward_ms"].get<double>() > 0.0);
    CHECK(step["queued_ms"].get<double>() > 0.0);  // the whole step, timed as a generation runs it
  }
  // Seconds per image use the queued step: ar's are prefill + steps x queued AR step + VQ decode.
  const double ar_seconds = j["prefill_seconds"].get<double>() +
                            j["seconds_per_image"][0]["steps"].get<double>() * j["ar_step"]["queued_ms"].get<double>() / 1e3 +
                            j["vq_seconds"].get<double>();
  CHECK(j["seconds_per_image"][0]["seconds"].get<double>() == Approx(ar_seconds).epsilon(1e-6));
  CHECK(j["png_seconds"].get<double>() > 0.0);  // timed, and not in the seconds per image
  // The head a generation computes: the tiny preset's codes are its whole vocabulary, and a CPU has no fused kernels.
  CHECK(j["head_rows"].get<int64_t>() > 0);
  CHECK(j["fused_layer_ops"] == false);
  for (const auto& b : j["batches"]) CHECK(b["graphs"] == 0);  // no CUDA graphs on a CPU
  // Fewer steps at a higher step compression.
  CHECK(j["seconds_per_image"][0]["steps"].get<int64_t>() > j["seconds_per_image"][3]["steps"].get<int64_t>());
}

TEST_CASE("bench --profile: a trace per step kind and the largest operators per step", "[cli][bench]") {
  TempDir dir("bench_profile");
  const auto traces = dir / "traces";  // made by sjd
  const auto json = dir / "bench.json";
  const auto r = run_sjd("bench --preset tiny --device cpu --dtype f32 --iterations 1 --warmup 0 --batch-sizes 1 "
                         "--no-vq --profile '" + traces.string() + "' --json '" + json.string() + "'");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(read_file(json));
  REQUIRE(j["profiles"].size() == 3);
  const std::vector<std::string> labels = {"ar", "L=64", "tree L=64"};
  const std::vector<std::string> files = {"tiny-ar.trace.json", "tiny-L64.trace.json", "tiny-tree.trace.json"};
  double ar_operators = 0.0;
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = j["profiles"][i];
    CHECK(p["label"] == labels[i]);
    CHECK(p["steps"] == 3);
    CHECK(p["what"] == "ATen operators (inclusive)");
    CHECK(p["trace"] == (traces / files[i]).string());
    CHECK_THAT(r.out, Catch::Contains("profile " + labels[i] + " (3 steps, trace " + (traces / files[i]).string()));
    // A Chrome trace of the profiled steps: the forward's matmuls among its events.
    const auto trace = nlohmann::json::parse(read_file(traces / files[i]));
    CHECK_THAT(trace.at("traceEvents").dump(), Catch::Contains("aten::matmul"));
    // The summary: whole operators per step, largest first, their shares within the counted total.
    REQUIRE(!p["top"].empty());
    double previous = std::numeric_limits<double>::infinity();
    for (const auto& k : p["top"]) {
      CHECK(k["us_per_step"].get<double>() <= previous);
      previous = k["us_per_step"].get<double>();
    }
    if (i == 0) {
      ar_operators = p["events_per_step"].get<double>();
    } else {  // a window step runs the same layers plus a wider verification: more operators than AR
      CHECK(p["events_per_step"].get<double>() > ar_operators);
    }
  }
  // The transformer's two projections per layer and the output head: matmuls every step.
  bool matmul = false;
  for (const auto& k : j["profiles"][0]["top"]) {
    if (k["name"] == "aten::matmul") matmul = k["calls_per_step"].get<double>() >= 3.0;
  }
  CHECK(matmul);
  // A folder that cannot be made is refused before anything runs.
  const auto blocked = run_sjd("bench --preset tiny --device cpu --profile '" + json.string() + "/x'");
  CHECK(blocked.exit_code == 2);
  CHECK_THAT(blocked.err, Catch::Contains("--profile " + json.string() + "/x: cannot create the output folder"));
  // Ended by Ctrl-C before a trace is written, the folders it made go, as every output folder's do (they stayed).
  const auto fresh = dir / "fresh" / "traces";
  CHECK(signal_once_there("bench --preset tiny --device cpu --dtype f32 --no-vq --profile " + shell_quoted(fresh),
                          fresh, "INT") == 130);
  CHECK_FALSE(std::filesystem::exists(dir / "fresh"));
  CHECK(j["profile_failures"].empty());
  const auto calibrate = run_sjd("bench --calibrate --profile '" + traces.string() + "'");
  CHECK(calibrate.exit_code == 2);
  CHECK_THAT(calibrate.err, Catch::Contains("--profile: for the presets; --calibrate times the bundle's own model"));
}

TEST_CASE("bench and generate reject bad devices, dtypes and presets with exit code 2", "[cli][bench]") {
  const auto preset = run_sjd("bench --preset huge");
  CHECK(preset.exit_code == 2);
  CHECK_THAT(preset.err, Catch::Contains("--preset: unknown preset 'huge'"));
  const auto typo = run_sjd("bench --preset lumina-7b-786");
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("did you mean 'lumina-7b-768'?"));
  const auto sizes = run_sjd("bench --preset tiny --batch-sizes 1,0");
  CHECK(sizes.exit_code == 2);
  CHECK_THAT(sizes.err, Catch::Contains("--batch-sizes: '0' is not a size >= 1"));
  for (const char* counts : {"--iterations 0", "--warmup -1", "--iterations 50000000", "--warmup 1001"}) {
    for (const char* mode : {"--preset tiny", "--calibrate --model models/default"}) {
      const auto bad = run_sjd(std::string("bench ") + mode + " " + counts);  // refused before any model or timing
      CHECK(bad.exit_code == 2);
      CHECK_THAT(bad.err, Catch::Contains("--iterations must be from 1 to 10000 and --warmup from 0 to 1000"));
    }
  }
  const auto cold = run_sjd("bench --preset tiny --device cuda --warmup 0");
  CHECK(cold.exit_code == 2);
  CHECK_THAT(cold.err, Catch::Contains("--warmup must be >= 1 on a GPU"));
  const auto dtype = run_sjd("bench --preset tiny --dtype f16");
  CHECK(dtype.exit_code == 2);
  CHECK_THAT(dtype.err, Catch::Contains("--dtype: unknown dtype 'f16'"));
  const std::string model = "'" + default_model().string() + "'";
  TempDir dir("bad_device");  // outputs go to a regular file: sjd refuses to replace /dev/null
  const std::string png = "'" + (dir / "a.png").string() + "'";
  const auto device = run_sjd("generate --model " + model + " -p 'a red apple' -o " + png + " --device tpu");
  CHECK(device.exit_code == 2);
  CHECK_THAT(device.err, Catch::Contains("--device: unknown device 'tpu'"));
  for (const char* bad : {"cuda:x", "cuda:", "cuda:123", "cuda1"}) {
    const auto index = run_sjd("generate --model " + model + " -p 'a red apple' -o " + png + " --device " + bad);
    CHECK(index.exit_code == 2);
    CHECK_THAT(index.err, Catch::Contains(std::string("unknown device '") + bad + "'"));
  }
  // Set by a config file, the error names the file and key, not a flag the user never gave.
  const auto config = dir / "c.json";
  const std::string with_config = "generate --model " + model + " -p 'a red apple' -o " + png + " --config '" +
                                  config.string() + "'";
  for (const auto& [layer, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"device": "tpu"})", "c.json: /device: unknown device 'tpu'"},
           {R"({"device": ""})", "c.json: /device: unknown device ''"},
           {R"({"dtype": "f16"})", "c.json: /dtype: unknown dtype 'f16'"}}) {
    write_file(config, layer);
    const auto r = run_sjd(with_config);
    INFO(layer);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(expected));
  }
#ifndef SJD_WITH_CUDA
  write_file(config, R"({"device": "cuda"})");
  const auto from_config = run_sjd(with_config);
  CHECK(from_config.exit_code == 2);
  CHECK_THAT(from_config.err, Catch::Contains("c.json: /device cuda: this build of sjd has no CUDA"));
  for (const std::string command : {"generate --model " + model + " -p 'a red apple' -o " + png + " --device cuda",
                                    "generate --model " + model + " -p 'a red apple' -o " + png + " --device cuda:1",
                                    std::string("bench --preset tiny --device cuda")}) {
    const auto cuda = run_sjd(command);
    CHECK(cuda.exit_code == 2);
    CHECK_THAT(cuda.err, Catch::Contains("this build of sjd has no CUDA"));
  }
#else
  const auto absent = run_sjd("generate --model " + model + " -p 'a red apple' -o " + png + " --device cuda:99");
  CHECK(absent.exit_code == 2);
  CHECK_THAT(absent.err, Catch::Contains("--device cuda:99"));
#endif
}

TEST_CASE("bench: every figure but the profiles is handed over before the profiles run", "[bench]") {
  // So that a profiler that never returns (killed by the caller's timeout) costs only the profiles:
  // `sjd bench --json` writes the file from this call, and again at the end.
  TempDir dir("bench_figures_first");
  sjd::engine::BenchOptions options;
  options.placement = sjd::engine::parse_placement("cpu", "f32");
  options.windows = {4};
  options.batch_sizes = {1, 2};
  options.iterations = 1;
  options.warmup = 0;
  options.vq = false;
  options.profile_dir = dir.path().string();
  options.profile_steps = 1;
  int calls = 0;
  options.figures_ready = [&](const sjd::engine::BenchReport& r) {
    ++calls;
    CHECK(r.profiles.empty());  // not yet profiled
    CHECK(r.batches.size() == 2);
    CHECK(r.ar.forward_ms > 0.0);
  };
  const sjd::engine::BenchReport report = sjd::engine::run_bench(options);
  CHECK(calls == 1);
  CHECK(report.profiles.size() == 3);
}

TEST_CASE("bench: windows past the fixture and memory past the machine are refused before any work",
          "[cli][bench][robustness]") {
  // The tiny preset leaves 128 codes at mid-image; a million prompts' caches fit no machine. Both
  // used to fail late: an index past the layout (exit 1), an allocator abort (exit 134).
  const auto windows = run_sjd("bench --preset tiny --device cpu --windows 16,128 --no-vq");
  CHECK(windows.exit_code == 2);
  CHECK_THAT(windows.err, Catch::Contains("--windows 128") && Catch::Contains("at most 127"));
  const auto memory = run_sjd("bench --preset tiny --device cpu --batch-sizes 1000000 --no-vq");
  CHECK(memory.exit_code == 2);
  CHECK_THAT(memory.err, Catch::Contains("at batch size 1000000") && Catch::Contains("available on cpu"));
}

TEST_CASE("bench: the real presets' default batch axis fits one 80 GB GPU by the estimate", "[bench][memory]") {
  // What the check above holds a GPU run to: were the estimate to pass an H100's 80 GB at the
  // defaults (batch sizes 1, 4, 16), the device check's bench stage would lose every preset.
  for (const char* name : {"lumina-7b-768", "emu3-8b-720", "llamagen-xl-512"}) {
    sjd::engine::BenchOptions options;
    options.placement.device = at::Device(at::kCUDA, 0);
    options.placement.dtype = at::kBFloat16;
    const sjd::engine::BenchMemory memory = sjd::engine::bench_memory(options, sjd::engine::bench_preset(name));
    INFO(name << ": " << memory.bytes << " bytes, " << memory.what);
    CHECK(memory.bytes < int64_t{76} * 1000 * 1000 * 1000);
    CHECK(memory.bytes > int64_t{1} * 1000 * 1000 * 1000);
  }
}

TEST_CASE("bench: one mode's flags given in the other, and an unwritable output, are refused before any work",
          "[cli][bench]") {
  const std::string model = shell_quoted(default_model());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench --preset tiny --out p.json --into-bundle", "--out, --into-bundle: for --calibrate (the presets take none)"},
      {"bench --calibrate --model " + model + " --json b.json --seed 3",
       "--seed, --json: for the presets; --calibrate times the bundle's own model"},
      {"bench --preset tiny --json /proc/b.json", "--json /proc/b.json: /proc: cannot create files in this folder"},
      {"bench --calibrate --model " + model + " --out /proc/p.json", "--out /proc/p.json: /proc: cannot create"},
  };
  for (const auto& [command, said] : cases) {
    const auto r = run_sjd(command);
    INFO(command << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(said));
    CHECK(r.out.empty());  // no figures printed: nothing was timed
  }
}
