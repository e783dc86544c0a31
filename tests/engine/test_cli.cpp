// End to end through the `sjd` program: golden tokens, PNG output, batch
// resume, and the exit code and one-line reason for bad input.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "io/png_reader.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

int count_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
  return n;
}

}  // namespace

TEST_CASE("generate: fixed seed gives the golden token ids and a PNG with its settings", "[cli]") {
  // The golden file holds the prompt, seed and the token ids `sjd generate --method ar` drew
  // with the trained default model: a regression snapshot of the program's own output, not an
  // independent derivation (the sampler's law is the chi-square tests', the forward's the logits
  // parity in tests/python/test_vq_default_model.py). It changes only when the model or the sampler
  // does; remade by `build/sjd generate --model models/default -p PROMPT --seed 7 --method ar
  // --tokens FILE` with the file's prompt, and the ids put under "tokens".
  const auto golden = nlohmann::json::parse(read_file(source_dir() / "tests/golden/default_model_ar_tokens.json"));
  const std::string prompt = golden.at("prompt");
  const std::string seed = std::to_string(golden.at("seed").get<int>());
  TempDir dir("generate");
  const auto png = dir / "scene.png";
  const auto tokens = dir / "tokens.json";
  const auto stats = dir / "stats.json";
  const std::string generate = "generate --model " + quoted(default_model()) + " -p '" + prompt + "' --seed " + seed;
  const auto r = run_sjd(generate + " -o " + quoted(png) + " --method ar --tokens " + quoted(tokens) + " --stats " +
                         quoted(stats));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("wrote"));
  CHECK(nlohmann::json::parse(read_file(tokens)) == golden.at("tokens"));
  const auto size = sjd::io::read_png_size(png);
  CHECK(size.first == 128);
  CHECK(size.second == 128);
  bool saw_prompt = false;
  for (const auto& [key, value] : sjd::io::read_png_text(png)) saw_prompt |= key == "prompt" && value == prompt;
  CHECK(saw_prompt);
  const auto s = nlohmann::json::parse(read_file(stats));
  CHECK(s["tokens"] == 1061);  // begin-image, 2 size tokens, 32 rows of 32 codes + row end, end-image, end of turn
  CHECK(s["steps"] == 1061);  // AR: one forward pass per token
  CHECK(s["lossless"] == true);

  // The same seed reproduces the image exactly; a speculative method runs too.
  const auto again = dir / "again.png";
  REQUIRE(run_sjd(generate + " -o " + quoted(again) + " --method ar").exit_code == 0);
  CHECK(read_file(again) == read_file(png));
  const auto spec = run_sjd(generate + " -o " + quoted(dir / "sjd.png") + " --method sjd-pac --relax cool");
  CHECK(spec.exit_code == 0);
  CHECK_THAT(spec.out, Catch::Contains("LOSSY"));
}

TEST_CASE("batch: one PNG per prompt, manifest lines, resume skips finished prompts of the same run, failures carry on",
          "[cli]") {
  TempDir dir("batch");
  const auto prompts = dir / "prompts.txt";
  write_file(prompts, "a red apple\na blue square\na green ring\n");
  const auto out = dir / "out";
  // A folder where the second image must go makes that prompt fail; the others still run.
  std::filesystem::create_directories(out / "00001_a-blue-square.png");
  const std::string cmd = "batch --model " + quoted(default_model()) + " --prompts " + quoted(prompts) +
                          " --out-dir " + quoted(out) + " --seed 3";
  const auto first = run_sjd(cmd);
  CHECK(first.exit_code == 1);
  CHECK(std::filesystem::exists(out / "00000_a-red-apple.png"));
  CHECK(std::filesystem::exists(out / "00002_a-green-ring.png"));
  CHECK(count_lines(out / "manifest.jsonl") == 3);
  CHECK_THAT(read_file(out / "manifest.jsonl"), Catch::Contains("\"status\":\"failed\""));
  // Each image says where its time went, as generate does; a batch of one adds up to at most its seconds.
  std::ifstream lines(out / "manifest.jsonl");
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["status"] != "ok") continue;
    INFO(line);
    double sum = 0.0;
    for (const char* stage : {"prefill", "forward", "pipeline", "verify", "vq", "write"}) {
      CHECK(record["seconds_by_stage"][stage].get<double>() > 0.0);
      sum += record["seconds_by_stage"][stage].get<double>();
    }
    CHECK(sum <= record["seconds"].get<double>());
  }

  std::filesystem::remove(out / "00001_a-blue-square.png");
  const auto before = std::filesystem::last_write_time(out / "00000_a-red-apple.png");
  const auto second = run_sjd(cmd);
  INFO(second.err);
  CHECK(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("1 generated, 2 already done, 0 failed"));
  CHECK(std::filesystem::last_write_time(out / "00000_a-red-apple.png") == before);
  CHECK(std::filesystem::exists(out / "00001_a-blue-square.png"));

  // A setting the method does not read makes no other run: lossless sjd-pac ignores lantern_k.
  const auto unread = run_sjd(cmd + " --lantern-k 3");
  INFO(unread.err);
  CHECK(unread.exit_code == 0);
  CHECK_THAT(unread.out, Catch::Contains("0 generated, 3 already done"));
  CHECK_THAT(unread.err, Catch::Contains("lantern_k 3 is ignored"));
  // Resuming with other settings or prompts would mix two runs: refused, the images kept.
  const auto other_cfg = run_sjd(cmd + " --cfg 2.5");
  CHECK(other_cfg.exit_code == 2);
  CHECK_THAT(other_cfg.err, Catch::Contains("manifest.jsonl:") && Catch::Contains("cfg 1.25 (now 2.5)"));  // the bundle says 1.25
  write_file(prompts, "a red pear\na blue square\na green ring\n");
  const auto other_prompts = run_sjd(cmd);
  CHECK(other_prompts.exit_code == 2);
  CHECK_THAT(other_prompts.err, Catch::Contains("00000_a-red-apple.png") && Catch::Contains("a red pear"));
  CHECK(std::filesystem::last_write_time(out / "00000_a-red-apple.png") == before);
  CHECK(count_lines(out / "manifest.jsonl") == 4);
}

TEST_CASE("bad input exits with code 2 and a one-line reason", "[cli]") {
  TempDir dir("bad");
  const std::string model = " --model " + quoted(default_model());
  write_file(dir / "bad.json", "{\"cfg\": 2.0, ");
  write_file(dir / "unknown.json", "{\"tmperature\": 1.0}");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generate --model /nonexistent/model -p x -o " + quoted(dir / "a.png"), "/nonexistent/model"},
      {"generate" + model + " -p x -o " + quoted(dir / "a.png") + " --config " + quoted(dir / "bad.json"), "bad.json"},
      {"generate" + model + " -p x -o " + quoted(dir / "a.png") + " --config " + quoted(dir / "unknown.json"),
       "tmperature"},
      {"generate" + model + " -p x -o " + quoted(dir / "a.png") + " --method fastest", "fastest"},
      // A missing folder is created (-o newdir/x.png); one under a regular file cannot be.
      {"generate" + model + " -p x -o " + quoted(dir / "bad.json" / "a.png"), (dir / "bad.json" / "a.png").string()},
      {"batch" + model + " --prompts /nonexistent.txt --out-dir " + quoted(dir / "o"), "/nonexistent.txt"},
  };
  for (const auto& [args, named] : cases) {
    const auto r = run_sjd(args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(named));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("sjd --help works for every subcommand", "[cli]") {
  for (const std::string cmd : {"generate", "batch"}) {
    const auto r = run_sjd(cmd + " --help");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("--model"));
  }
  CHECK_THAT(run_sjd("generate --help").out, Catch::Contains("LOSSY"));
}

TEST_CASE("compare: table, JSON and image grid for several methods", "[cli]") {
  TempDir dir("compare");
  const auto r = run_sjd("compare --model " + quoted(default_model()) +
                         " -p 'a red apple' --methods ar,sjd,sjd-pac --seeds 2 --out-dir " + quoted(dir.path()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("sjd-pac") && Catch::Contains("speed-up"));
  const auto report = nlohmann::json::parse(read_file(dir / "compare.json"));
  REQUIRE(report["methods"].size() == 3);
  CHECK(report["methods"][0]["steps"] == 1061.0);  // ar: a forward pass per token
  CHECK(report["methods"][2]["step_compression"].get<double>() > 1.0);
  // The figure: 128-pixel images drawn 2x in a labelled grid (one column per method, one row per
  // seed) with charts beside it; tests/engine/test_compare_figure.cpp checks its layout.
  const auto size = sjd::io::read_png_size(dir / "compare.png");
  CHECK(size.first > 3 * 192);
  CHECK(size.second > 2 * 192);
  CHECK(report["runs"].size() == 3 * 2);
  CHECK(report["methods"][2]["speedup_vs_ar"].get<double>() > 0.0);
  // The base settings leave out the method (the bundle's default, which compare does not run).
  CHECK(report["settings"].contains("cfg"));
  CHECK_FALSE(report["settings"].contains("method"));
  CHECK(report["settings"]["batch_size"] == 1);  // "auto" decodes one run at a time, and says so
  // Each method row names the base settings it does not read: ar no window, sjd no tree; never the batch size.
  const auto without_effect = [&](int row) {
    const auto keys = report["methods"][row]["settings_without_effect"].get<std::vector<std::string>>();
    return std::set<std::string>(keys.begin(), keys.end());
  };
  CHECK(without_effect(0).count("window") == 1);
  CHECK(without_effect(0).count("init") == 1);
  CHECK(without_effect(1).count("window") == 0);
  CHECK(without_effect(1).count("pd_k") == 1);
  CHECK(without_effect(2).count("pd_k") == 0);
  for (int row = 0; row < 3; ++row) CHECK(without_effect(row).count("batch_size") == 0);
  for (const auto& run : report["runs"]) CHECK(run["lossless"] == (run["exactness"] != "lossy"));
  CHECK(report["runs"][0]["lossless"] == true);
  // Without an ar row there is no speed-up to give: null, not 0 ("0x as fast").
  const auto alone = run_sjd("compare --model " + quoted(default_model()) + " -p 'a red apple' --methods sjd --out-dir " +
                             quoted(dir / "alone"));
  REQUIRE(alone.exit_code == 0);
  const auto row = nlohmann::json::parse(read_file(dir / "alone" / "compare.json"))["methods"][0];
  CHECK(row["speedup_vs_ar"].is_null());
  CHECK(row["decode_speedup_vs_ar"].is_null());
  CHECK(row["decode_speedup_per_compression"].is_null());
}

TEST_CASE("stats and heatmap show where acceleration happens", "[cli]") {
  TempDir dir("heatmap");
  const auto r = run_sjd("generate --model " + quoted(default_model()) + " -p 'a red apple' -o " +
                         quoted(dir / "a.png") + " --method scd-mc --stats " + quoted(dir / "s.json") +
                         " --heatmap " + quoted(dir / "h.png"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("also wrote " + (dir / "s.json").string() + " (stats), " +
                                    (dir / "h.png").string() + " (step heatmap)\n"));
  const auto s = nlohmann::json::parse(read_file(dir / "s.json"));
  const auto at_step = s["committed_at_step"].get<std::vector<int64_t>>();
  REQUIRE(at_step.size() == 1061);
  CHECK(std::is_sorted(at_step.begin(), at_step.end()));
  CHECK(at_step.back() == s["steps"].get<int64_t>() - 1);
  int64_t histogram_tokens = 0;
  const auto histogram = s["accepted_length_histogram"].get<std::vector<int64_t>>();
  for (size_t n = 0; n < histogram.size(); ++n) histogram_tokens += static_cast<int64_t>(n) * histogram[n];
  CHECK(histogram_tokens == 1061);
  // Side by side (the default): the image and the map, 256 pixels each, and a colour bar.
  CHECK(sjd::io::read_png_size(dir / "h.png").first > 2 * 256);
}
