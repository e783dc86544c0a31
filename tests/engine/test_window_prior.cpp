// End to end: a bundle's "window_prior" (scripts/window_prior.py) is what the
// automatic windows start from, for the run's draft init; a batch plans from it
// alone; a malformed one is refused naming the key; the batch manifest carries
// each image's drafts by age.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_runner.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// The default model with `prior` as its window_prior (null: none at all).
std::filesystem::path model_with_prior(const TempDir& dir, const std::string& name, const nlohmann::json& prior) {
  const std::filesystem::path model = dir / name;
  std::filesystem::copy(default_model(), model, std::filesystem::copy_options::recursive);
  auto bundle = nlohmann::json::parse(read_file(model / "bundle.json"));
  bundle.erase("window_prior");
  if (!prior.is_null()) bundle["window_prior"] = prior;
  std::ofstream(model / "bundle.json") << bundle.dump(2);
  return model;
}

// Alone (2 rows), each draft costs half an AR step: with the generic prior (0.2 / 0.5 / 0.65) no
// window pays, with drafts that pass 90% of the time a long one does. In a batch of 4 (8 rows) a
// draft costs a quarter of the step.
std::filesystem::path half_step_profile(const TempDir& dir) {
  nlohmann::json alone = nlohmann::json::array(), batch = nlohmann::json::array();
  for (int t : {1, 2, 4, 8, 16, 32, 64, 128}) {
    alone.push_back({t, 1.0 + 0.5 * (t - 1)});
    batch.push_back({t, 2.0 + 0.5 * (t - 1)});
  }
  const std::filesystem::path file = dir / "profile.json";
  std::ofstream(file) << nlohmann::json{{"name", "half-step drafts"},
                                        {"curves", {{{"rows", 2}, {"points", alone}}, {{"rows", 8}, {"points", batch}}}}}
                             .dump();
  return file;
}

nlohmann::json generate_stats(const TempDir& dir, const std::filesystem::path& model, const std::string& name,
                              const std::string& flags) {
  const auto r = run_sjd("generate --model " + quoted(model) + " -p 'a large red square in the centre, on a blue " +
                         "background' --seed 3 -o " + quoted(dir / (name + ".png")) + " --stats " +
                         quoted(dir / (name + ".json")) + " --cost-profile " + quoted(half_step_profile(dir)) + " " +
                         flags);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(read_file(dir / (name + ".json")));
}

}  // namespace

TEST_CASE("generate: the bundle's window prior for the run's init decides the first windows", "[cli][auto]") {
  TempDir dir("window-prior");
  const auto generic = model_with_prior(dir, "generic", nullptr);
  const auto trusting = model_with_prior(dir, "trusting", {{"repeat-up", {0.9, 0.9, 0.9}}, {"random", {0, 0, 0}}});

  const auto g = generate_stats(dir, generic, "g", "--method sjd --init repeat-up");
  CHECK(g["windows"]["prior_by_age"] == nlohmann::json({0.2, 0.5, 0.65}));
  CHECK(g["windows"]["learning"] == true);
  CHECK(g["windows"]["chain_at_step"][0] == 0);  // the generic prior: an AR step first

  const auto t = generate_stats(dir, trusting, "t", "--method sjd --init repeat-up");
  CHECK(t["windows"]["prior_by_age"] == nlohmann::json({0.9, 0.9, 0.9}));
  CHECK(t["windows"]["chain_at_step"][0].get<int>() >= 2);  // the bundle's prior: a window at once
  // The prior is per init: random drafts this bundle says never pass start with an AR step.
  const auto r = generate_stats(dir, trusting, "r", "--method sjd --init random");
  CHECK(r["windows"]["prior_by_age"] == nlohmann::json({0, 0, 0}));
  CHECK(r["windows"]["chain_at_step"][0] == 0);
  // The generic prior where the bundle's was not measured: another init, other sampling settings than the
  // bundle's defaults, greedy decoding.
  const nlohmann::json generic_prior = {0.2, 0.5, 0.65};
  for (const std::string flags : {"--method sjd --init repeat-left", "--method sjd --init repeat-up --temperature 0.9",
                                  "--method sjd --init repeat-up --top-k 64", "--method sjd --init repeat-up --cfg 2",
                                  "--method jacobi --init repeat-up"}) {
    INFO(flags);
    CHECK(generate_stats(dir, trusting, "s", flags)["windows"]["prior_by_age"] == generic_prior);
  }
  CHECK(generate_stats(dir, trusting, "s", "--method sjd --init repeat-up --cfg 1.25")["windows"]["prior_by_age"] ==
        nlohmann::json({0.9, 0.9, 0.9}));  // the bundle's own cfg, written out
  // No automatic window, no prior to report.
  const auto ar = generate_stats(dir, trusting, "ar", "--method ar");
  CHECK(ar["windows"]["prior_by_age"].is_null());
  CHECK(ar["windows"]["learning"].is_null());
}

TEST_CASE("generate: planned for a batch the windows follow the prior alone, for one image its outcomes",
          "[cli][auto]") {
  TempDir dir("window-prior-batch");
  const auto model = model_with_prior(dir, "model", {{"repeat-up", {0.6, 0.8, 0.75}}});
  const auto batched = generate_stats(dir, model, "b", "--method sjd --batch-size 4");
  CHECK(batched["windows"]["learning"] == false);
  auto chains = batched["windows"]["chain_at_step"].get<std::vector<int>>();
  REQUIRE(chains.size() > 8);
  chains.resize(chains.size() - 8);  // the last steps may be cut short by the image's end
  CHECK(std::set<int>(chains.begin(), chains.end()).size() == 1);  // one window, every step
  CHECK(chains[0] >= 1);

  const auto alone = generate_stats(dir, model, "a", "--method sjd --batch-size 1");
  CHECK(alone["windows"]["learning"] == true);
  const auto steps = alone["windows"]["chain_at_step"].get<std::vector<int>>();
  CHECK(std::set<int>(steps.begin(), steps.end()).size() > 1);  // it follows what its drafts do
}

TEST_CASE("generate: a malformed window_prior exits 2 naming bundle.json and the key", "[cli][auto]") {
  TempDir dir("window-prior-bad");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {nlohmann::json::array({0.5}), "/window_prior: expected an object"},
      {{{"repeat-up", {0.5, 0.6}}}, "/window_prior/repeat-up: expected 3 acceptance rates"},
      {{{"repeat-up", {0.5, 0.6, 1.0}}}, "/window_prior/repeat-up/2: expected a rate from 0 to 0.99, got 1.0"},
      {{{"repeat-up", {0.5, "high", 0.7}}}, "/window_prior/repeat-up/1: expected a rate"},
      {{{"repeat-upp", {0.5, 0.6, 0.7}}}, "/window_prior/repeat-upp: unknown init scheme"},
  };
  int i = 0;
  for (const auto& [prior, message] : cases) {
    const auto model = model_with_prior(dir, "m" + std::to_string(i++), prior);
    const auto r = run_sjd("generate --model " + quoted(model) + " -p 'a red square' -o " + quoted(dir / "x.png"));
    INFO(prior.dump() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("bundle.json") && Catch::Contains(message));
  }
  // A batch refuses it before any image, rather than failing every image on its own.
  const auto model = model_with_prior(dir, "batch", cases[1].first);
  std::ofstream(dir / "prompts.txt") << "a red square\na blue ring\n";
  const auto r = run_sjd("batch --model " + quoted(model) + " --prompts " + quoted(dir / "prompts.txt") +
                         " --out-dir " + quoted(dir / "out") + " --method ar --quiet");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(cases[1].second));
  CHECK(!std::filesystem::exists(dir / "out" / "manifest.jsonl"));
}

TEST_CASE("batch: the manifest carries each image's drafts tested and accepted by age", "[cli][auto]") {
  TempDir dir("window-prior-manifest");
  std::ofstream(dir / "prompts.txt") << "a red square\na large blue circle on the left, on a yellow background\n";
  const auto r = run_sjd("batch --model " + quoted(default_model()) + " --prompts " + quoted(dir / "prompts.txt") +
                         " --out-dir " + quoted(dir / "out") + " --method sjd -L 4 --quiet");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream manifest(dir / "out" / "manifest.jsonl");
  int images = 0;
  for (std::string line; std::getline(manifest, line); ++images) {
    const auto record = nlohmann::json::parse(line);
    const auto& by_age = record["drafts_by_age"];
    REQUIRE(!by_age.empty());
    int64_t accepted = 0;
    for (const auto& a : by_age) accepted += a["accepted"].get<int64_t>();
    CHECK(accepted > 0);
    // Each step's first token is no draft, and forced structure tokens are not counted.
    CHECK(accepted <= record["tokens"].get<int64_t>() - record["steps"].get<int64_t>());
  }
  CHECK(images == 2);
}

TEST_CASE("batch: a folder is not resumed once the bundle's window prior changed, unless its windows are fixed",
          "[cli][auto][batch]") {
  TempDir dir("window-prior-resume");
  auto model = model_with_prior(dir, "model", {{"repeat-up", {0.6, 0.8, 0.75}}});
  std::ofstream(dir / "prompts.txt") << "a red square\na large blue circle on the left, on a yellow background\n";
  const auto batch = [&](const std::string& out, const std::string& flags) {
    return run_sjd("batch --model " + quoted(model) + " --prompts " + quoted(dir / "prompts.txt") + " --out-dir " +
                   quoted(dir / out) + " --method sjd --quiet " + flags);
  };
  REQUIRE(batch("auto", "--limit 1").exit_code == 0);
  REQUIRE(batch("fixed", "-L 4 --limit 1").exit_code == 0);
  const auto first = nlohmann::json::parse(read_file(dir / "auto" / "manifest.jsonl"));
  CHECK(first["planning"]["window_prior"] == nlohmann::json({0.6, 0.8, 0.75}));
  CHECK_THAT(first["planning"]["step_cost"].get<std::string>(), Catch::Contains("crc32"));
  CHECK(!nlohmann::json::parse(read_file(dir / "fixed" / "manifest.jsonl")).contains("planning"));

  // The same bundle: the auto folder resumes.
  REQUIRE(batch("auto", "").exit_code == 0);
  // A re-measured prior would choose other windows: the auto folder is refused, the fixed one resumes.
  std::filesystem::remove_all(dir / "model");
  model = model_with_prior(dir, "model", {{"repeat-up", {0.5, 0.7, 0.7}}});
  std::ofstream(dir / "prompts.txt", std::ios::app) << "a green ring\n";
  const auto refused = batch("auto", "");
  INFO(refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("manifest.jsonl:1") && Catch::Contains("window_prior"));
  CHECK(batch("fixed", "-L 4").exit_code == 0);

  // So is a folder whose step-cost profile file was recalibrated in between (same name, other points).
  const std::string profile = " --cost-profile " + quoted(half_step_profile(dir));
  REQUIRE(batch("profiled", "--limit 1" + profile).exit_code == 0);
  auto recalibrated = nlohmann::json::parse(read_file(dir / "profile.json"));
  recalibrated["curves"][0]["points"][1][1] = 1.25;
  std::ofstream(dir / "profile.json") << recalibrated.dump();
  const auto changed = batch("profiled", profile);
  INFO(changed.err);
  CHECK(changed.exit_code == 2);
  CHECK_THAT(changed.err, Catch::Contains("automatic windows planned from step_cost"));
}
