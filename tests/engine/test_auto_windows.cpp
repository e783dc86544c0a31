// End to end: automatic windows (the default), fixed ones honoured, the
// step-cost profile recorded and read, and `sjd bench --calibrate`.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_runner.h"
#include "io/png_reader.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

const std::string kPrompt = "a large red square in the centre, on a blue background";

std::string generate(const std::filesystem::path& dir, const std::string& name, const std::string& flags) {
  return "generate --model " + quoted(default_model()) + " -p '" + kPrompt + "' --seed 3 -o " +
         quoted(dir / (name + ".png")) + " --stats " + quoted(dir / (name + ".json")) + " --tokens " +
         quoted(dir / (name + ".tokens.json")) + " " + flags;
}

nlohmann::json stats_of(const std::filesystem::path& dir, const std::string& name) {
  return nlohmann::json::parse(read_file(dir / (name + ".json")));
}

void write_profile(const std::filesystem::path& file, double ms_per_token) {
  nlohmann::json points = nlohmann::json::array();
  for (int t : {1, 2, 4, 8, 16, 32, 64, 128}) points.push_back({t, 1.0 + ms_per_token * (t - 1)});
  std::ofstream(file) << nlohmann::json{{"name", "test profile"}, {"rows", 2}, {"points", points}}.dump();
}

}  // namespace

TEST_CASE("generate: automatic windows are the default, recorded in stats and PNG, and repeatable", "[cli][auto]") {
  TempDir dir("auto-windows");
  REQUIRE(run_sjd(generate(dir.path(), "a", "--method sjd-pac")).exit_code == 0);
  REQUIRE(run_sjd(generate(dir.path(), "b", "--method sjd-pac")).exit_code == 0);
  CHECK(read_file(dir / "a.png") == read_file(dir / "b.png"));  // windows never depend on timings
  const auto s = stats_of(dir.path(), "a");
  CHECK_THAT(s["method"].get<std::string>(), Catch::Contains("L=auto") && Catch::Contains("K=auto"));
  CHECK(s["settings"]["window"] == "auto");
  CHECK(s["windows"]["chain_at_step"].size() == s["steps"].get<size_t>());
  // The acceptance the planner learned, by draft age: fresh drafts (age 0) and refined ones.
  const auto& by_age = s["windows"]["drafts_by_age"];
  REQUIRE(by_age.size() >= 2);
  CHECK(by_age[0]["age"] == "0");
  int64_t accepted = 0;
  for (const auto& a : by_age) {
    CHECK(a["accepted"].get<int64_t>() <= a["tested"].get<int64_t>());
    accepted += a["accepted"].get<int64_t>();
  }
  CHECK(accepted <= s["tokens"].get<int64_t>() - s["steps"].get<int64_t>());  // each step's first token is no draft
  CHECK(s["verifier"] == "cpu");  // where the windows were verified
  // The bundle's own measured CPU profile, named in the stats and in the PNG.
  CHECK_THAT(s["windows"]["cost_profile"].get<std::string>(), Catch::Contains("sjd-default-scenes cpu-f32"));
  bool png_names_profile = false;
  for (const auto& [key, value] : sjd::io::read_png_text(dir / "a.png")) {
    png_names_profile |= key == "cost_profile" && value.find("sjd-default-scenes cpu-f32") != std::string::npos;
  }
  CHECK(png_names_profile);
}

TEST_CASE("generate: fixed windows and trees are honoured", "[cli][auto]") {
  TempDir dir("fixed-windows");
  REQUIRE(run_sjd(generate(dir.path(), "w", "--method sjd -L 8")).exit_code == 0);
  const auto chains = stats_of(dir.path(), "w")["windows"]["chain_at_step"].get<std::vector<int>>();
  const std::set<int> distinct(chains.begin(), chains.end());
  CHECK(*distinct.rbegin() == 8);  // 8 everywhere but where the image ends first
  CHECK(std::count(chains.begin(), chains.end(), 8) >= static_cast<long>(chains.size()) - 8);
  REQUIRE(run_sjd(generate(dir.path(), "t", "--method sjd-pac -L 16 --pd-k 2 --pd-depth 1")).exit_code == 0);
  const auto t = stats_of(dir.path(), "t");
  REQUIRE(t["tree_windows"].get<int>() > 0);
  CHECK(t["windows"]["mean_tree_k"] == 2.0);
  CHECK(t["windows"]["mean_tree_depth"] == 1.0);
  // Fixed windows read no step-cost profile, so neither the stats nor the PNG name one.
  for (const std::string& name : {"w", "t"}) {
    INFO(name);
    CHECK(stats_of(dir.path(), name)["windows"]["cost_profile"].is_null());
    for (const auto& [key, value] : sjd::io::read_png_text(dir / (name + ".png"))) CHECK(key != "cost_profile");
  }
}

TEST_CASE("generate: the step-cost profile steers the window, the same profile gives the same tokens", "[cli][auto]") {
  TempDir dir("profiles");
  write_profile(dir / "profile-flat.json", 0.001);   // a window costs nothing: long windows pay
  write_profile(dir / "profile-steep.json", 10.0);   // every draft costs ten AR steps: none pays
  REQUIRE(run_sjd(generate(dir.path(), "flat", "--method sjd --cost-profile " + quoted(dir / "profile-flat.json"))).exit_code == 0);
  REQUIRE(run_sjd(generate(dir.path(), "steep", "--method sjd --cost-profile " + quoted(dir / "profile-steep.json"))).exit_code == 0);
  const double flat = stats_of(dir.path(), "flat")["windows"]["mean_chain"];
  const double steep = stats_of(dir.path(), "steep")["windows"]["mean_chain"];
  INFO("mean chain: flat profile " << flat << ", steep profile " << steep);
  CHECK(flat > 8.0);
  CHECK(steep < 1.0);
  CHECK(stats_of(dir.path(), "flat")["windows"]["cost_profile"].get<std::string>().rfind("test profile", 0) == 0);
  // Another machine, or a loaded one, reads the same profile: the same tokens, on any thread count.
  const char* threads = std::getenv("OMP_NUM_THREADS");
  const std::string saved = threads != nullptr ? threads : "";
  setenv("OMP_NUM_THREADS", "2", 1);
  const int code = run_sjd(generate(dir.path(), "flat2", "--method sjd --cost-profile " + quoted(dir / "profile-flat.json"))).exit_code;
  if (threads != nullptr) setenv("OMP_NUM_THREADS", saved.c_str(), 1); else unsetenv("OMP_NUM_THREADS");
  REQUIRE(code == 0);
  CHECK(read_file(dir / "flat.tokens.json") == read_file(dir / "flat2.tokens.json"));
}

TEST_CASE("generate: window and tree sizes take auto or a whole number in range", "[cli][auto]") {
  TempDir dir("bad-windows");
  for (const std::string flags : {"--window 0", "--window 2.5", "--window -3", "--window lots", "--pd-k 0",
                                  "--pd-depth -1", "--pd-k auto2", "--window +4", "--window ' 4'"}) {
    const auto r = run_sjd(generate(dir.path(), "x", "--method sjd-pac " + flags));
    INFO(flags << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--window") || Catch::Contains("--pd-"));
  }
  std::ofstream(dir / "config.json") << R"({"window": 16.7})";
  const auto r = run_sjd(generate(dir.path(), "x", "--method sjd --config " + quoted(dir / "config.json")));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("/window"));
  std::ofstream(dir / "auto.json") << R"({"window": "auto", "pd_k": 2, "pd_depth": "auto"})";
  CHECK(run_sjd(generate(dir.path(), "y", "--method sjd-pac --config " + quoted(dir / "auto.json"))).exit_code == 0);
}

TEST_CASE("bench --calibrate measures a curve per batch size that generate reads", "[cli][auto]") {
  TempDir dir("calibrate");
  std::filesystem::copy(default_model(), dir / "model", std::filesystem::copy_options::recursive);
  const auto r = run_sjd("bench --calibrate --model " + quoted(dir / "model") + " --device cpu --dtype f32 " +
                         "--iterations 1 --warmup 0 --batch-sizes 1,3 --out " + quoted(dir / "profile.json") +
                         " --into-bundle");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ms per step") && Catch::Contains("wrote the profile to " + (dir / "profile.json").string()));
  CHECK_THAT(r.err, Catch::Contains("timing batch size 1 (1 of 2)") && Catch::Contains("timing batch size 3 (2 of 2)"));
  CHECK(r.err.find("not kept") == std::string::npos);
  const auto profile = nlohmann::json::parse(read_file(dir / "profile.json"));
  const auto& curves = profile["curves"];
  REQUIRE(curves.size() == 2);
  CHECK(curves[0]["rows"] == 2);  // the bundle's cfg makes two rows per prompt
  CHECK(curves[1]["rows"] == 6);
  for (const auto& curve : curves) {
    const auto& points = curve["points"];
    REQUIRE(points.size() >= 8);
    for (size_t i = 1; i < points.size(); ++i) {
      CHECK(points[i][0] > points[i - 1][0]);
      CHECK(points[i][1] >= points[i - 1][1]);  // never cheaper for a bigger window
    }
  }
  const auto bundle = nlohmann::json::parse(read_file(dir / "model" / "bundle.json"));
  CHECK(bundle["step_cost"]["cpu-f32"] == profile);
  const auto g = run_sjd("generate --model " + quoted(dir / "model") + " -p 'a red square' --method sjd -o " +
                         quoted(dir / "x.png"));
  INFO(g.err);
  CHECK(g.exit_code == 0);
}

TEST_CASE("bench --calibrate --into-bundle: what would stop the write is refused before timing, and edits meanwhile stay",
          "[cli][auto]") {
  TempDir dir("calibrate_into");
  const std::string calibrate = " --device cpu --dtype f32 --warmup 0 --into-bundle --model ";
  // A step_cost that cannot take the profile was found only after the whole calibration (exit 1).
  const auto model = dir / "model";
  std::filesystem::copy(default_model(), model, std::filesystem::copy_options::recursive);
  auto bundle = nlohmann::json::parse(read_file(model / "bundle.json"));
  const nlohmann::json original = bundle;
  bundle["step_cost"] = nlohmann::json::array();
  write_file(model / "bundle.json", bundle.dump(2));
  const auto malformed = run_sjd("bench --calibrate --iterations 1 --batch-sizes 1" + calibrate + quoted(model));
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(malformed.err, Catch::Contains("step_cost"));
  CHECK(malformed.out.find("ms per step") == std::string::npos);
  // A bundle.json that is a link is not replaced: said before the work, naming the flag.
  write_file(dir / "elsewhere.json", original.dump(2));
  std::filesystem::remove(model / "bundle.json");
  std::filesystem::create_symlink(dir / "elsewhere.json", model / "bundle.json");
  const auto linked = run_sjd("bench --calibrate --iterations 1 --batch-sizes 1" + calibrate + quoted(model));
  CHECK(linked.exit_code == 2);
  CHECK_THAT(linked.err, Catch::Contains("--into-bundle: ") && Catch::Contains("symbolic link"));
  CHECK(linked.out.find("ms per step") == std::string::npos);
  // An edit made while it runs (a few seconds here) is kept beside the profile: it was written over.
  std::filesystem::remove(model / "bundle.json");
  write_file(model / "bundle.json", original.dump(2));
  CommandResult run;
  std::atomic<bool> finished{false};
  std::thread calibration([&] {
    run = run_sjd("bench --calibrate --iterations 30 --batch-sizes 1,2" + calibrate + quoted(model));
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto edited = original;
  edited["name"] = "renamed while calibrating";
  write_file(model / "bundle.json", edited.dump(2));
  const bool edited_while_running = !finished;
  calibration.join();
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(edited_while_running);  // else the edit came after the write, and the checks below prove nothing
  const auto after = nlohmann::json::parse(read_file(model / "bundle.json"));
  CHECK(after["name"] == "renamed while calibrating");
  // The new profile (two batch sizes) replaced the shipped one (five): the edit did not cost the result.
  REQUIRE(after["step_cost"].contains("cpu-f32"));
  CHECK(after["step_cost"]["cpu-f32"] != original["step_cost"]["cpu-f32"]);
  CHECK(after["step_cost"]["cpu-f32"]["curves"].size() == 2);
}

TEST_CASE("bench --calibrate: a batch too large for the memory exits 2 with the estimate, before timing",
          "[cli][auto]") {
  const auto r = run_sjd_limited("bench --calibrate --model " + quoted(default_model()) +
                         " --device cpu --dtype f32 --iterations 1 --warmup 0 --batch-sizes 1,100000");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("for a calibration batch of 100000"));
  // Neither --out nor --into-bundle: said before any timing, so minutes are not spent unawares.
  CHECK_THAT(r.err, Catch::Contains("the profile will be printed, not kept (--out FILE or --into-bundle keep it)"));
  CHECK(r.out.find("ms per step") == std::string::npos);
}

TEST_CASE("generate: a config file's cost_profile is found beside the config, wherever sjd runs", "[cli][auto]") {
  TempDir dir("config_profile");
  std::filesystem::create_directories(dir / "cfg");
  write_profile(dir / "cfg" / "flat.json", 0.001);
  write_file(dir / "cfg" / "run.json", R"({"cost_profile": "flat.json"})");  // not in the current folder
  const auto r = run_sjd(generate(dir.path(), "c", "--method sjd --config " + quoted(dir / "cfg" / "run.json")));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(stats_of(dir.path(), "c")["windows"]["cost_profile"].get<std::string>().rfind("test profile", 0) == 0);
}
