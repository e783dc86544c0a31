// `sjd batch` decodes several prompts in one forward (continuous batching):
// the images do not depend on how many share a step, a killed batch resumes
// without losing or doubling an image, and `generate --batch-size B`
// reproduces an image of a batch-B run with automatic windows.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"
#include "io/png_chunks.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

// The image data of a PNG (its IDAT chunks): equal pixels give equal bytes, whatever the text chunks say.
std::string pixel_bytes(const std::filesystem::path& png) {
  std::string data;
  for (const auto& chunk : sjd::io::parse_png_chunks(read_file(png), png)) {
    if (chunk.type == "IDAT") data += chunk.data;
  }
  return data;
}

// Prompts of different lengths (so the rows of a batch hold prompts of different lengths).
const char* const kPrompts =
    "a large blue circle on the left, on a yellow background\n"
    "a small red square\n"
    "a green triangle in the middle, on a white background\n"
    "a ring\n"
    "a purple circle at the top, on a black background\n";
constexpr int kPromptCount = 5;

std::string batch(const std::filesystem::path& prompts, const std::filesystem::path& out, const std::string& flags) {
  return batch_args(prompts, out) + " --seed 11 " + flags;
}

std::vector<std::filesystem::path> pngs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".png") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("batch: fixed windows give the same images at batch sizes 1 and 3 and 8", "[cli][batch]") {
  TempDir dir("batched_fixed");
  write_file(dir / "prompts.txt", kPrompts);
  for (const std::string method : {"ar", "scd-mc --window 6", "sjd-pac --window 8 --pd-k 2 --pd-depth 2"}) {
    std::map<int, std::vector<std::filesystem::path>> made;
    for (int b : {1, 3, 8}) {
      const auto out = dir / (method.substr(0, 3) + std::to_string(b));
      const auto r = run_sjd_limited(batch(dir / "prompts.txt", out, "--method " + method + " --batch-size " +
                                                                          std::to_string(b)));
      INFO(method << " B=" << b << ": " << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::Contains("at batch size " + std::to_string(b)));
      made[b] = pngs(out);
      REQUIRE(made[b].size() == kPromptCount);
    }
    for (int b : {3, 8}) {
      for (size_t i = 0; i < made[1].size(); ++i) {
        INFO(method << " B=" << b << " " << made[b][i].filename());
        CHECK(made[b][i].filename() == made[1][i].filename());
        CHECK(pixel_bytes(made[b][i]) == pixel_bytes(made[1][i]));
      }
    }
  }
}

TEST_CASE("batch: with automatic windows generate --batch-size B reproduces an image of a batch-B run",
          "[cli][batch]") {
  TempDir dir("batched_auto");
  write_file(dir / "prompts.txt", kPrompts);
  const auto r = run_sjd_limited(batch(dir / "prompts.txt", dir / "out", "--method sjd-pac --batch-size 3"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto made = pngs(dir / "out");
  REQUIRE(made.size() == kPromptCount);
  // Image 2 has seed 11 + 2.
  const auto g = run_sjd_limited("generate --model " + shell_quoted(default_model()) +
                                 " -p 'a green triangle in the middle, on a white background' --seed 13 "
                                 "--method sjd-pac --batch-size 3 -o " + shell_quoted(dir / "alone.png"));
  INFO(g.err);
  REQUIRE(g.exit_code == 0);
  CHECK(pixel_bytes(dir / "alone.png") == pixel_bytes(made[2]));
  CHECK(read_file(dir / "alone.png").find("\"batch_size\":3") != std::string::npos);  // the setting is recorded
}

TEST_CASE("batch: a batch killed mid-run resumes with every image made once and equal to an uninterrupted run",
          "[cli][batch]") {
  TempDir dir("batched_kill");
  std::string prompts;
  for (int i = 0; i < 3; ++i) prompts += kPrompts;
  write_file(dir / "prompts.txt", prompts);
  const std::string flags = "--method sjd --window 4 --batch-size 4";
  REQUIRE(run_sjd_limited(batch(dir / "prompts.txt", dir / "whole", flags)).exit_code == 0);

  // Start a run, kill it once some images are in its manifest, then resume.
  const auto out = dir / "out";
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string command = (build_dir() / "sjd").string() + " " + batch(dir / "prompts.txt", out, flags) +
                                " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto manifest = out / "manifest.jsonl";
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::filesystem::exists(manifest) && read_file(manifest).find("\"index\"") != std::string::npos) break;
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string before = read_file(manifest);
  const auto lines_before = std::count(before.begin(), before.end(), '\n');
  CHECK(lines_before > 0);
  CHECK(lines_before < 3 * kPromptCount);  // killed mid-run, not after it
  const auto r = run_sjd_limited(batch(dir / "prompts.txt", out, flags));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::map<int64_t, int> made;
  std::ifstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ++made[nlohmann::json::parse(line)["index"].get<int64_t>()];
  }
  CHECK(made.size() == 3 * kPromptCount);
  for (const auto& [index, times] : made) CHECK(times == 1);
  const auto resumed = pngs(out), whole = pngs(dir / "whole");
  REQUIRE(resumed.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) CHECK(read_file(resumed[i]) == read_file(whole[i]));
}

TEST_CASE("batch: the summary counts the images a batch size larger than the prompt file made", "[cli][batch][ux]") {
  TempDir dir("batched_summary");
  write_file(dir / "one.txt", "a red circle\n");
  const auto r = run_sjd(batch(dir / "one.txt", dir / "out", "--method ar --batch-size 2"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("at batch size 2 (1 image),"));
}

TEST_CASE("batch: on a terminal a progress line follows the images in flight step by step", "[cli][batch][ux]") {
  TempDir dir("batched_progress");
  write_file(dir / "prompts.txt", kPrompts);
  // Every update shown (SJD_PROGRESS_INTERVAL=0), so a line within an image appears however fast the machine.
  struct EveryUpdate {
    EveryUpdate() { setenv("SJD_PROGRESS_INTERVAL", "0", 1); }
    ~EveryUpdate() { unsetenv("SJD_PROGRESS_INTERVAL"); }
  };
  const std::string command = batch(dir / "prompts.txt", dir / "out", "--method sjd --batch-size 2");
  const auto shown = [&] {
    const EveryUpdate every_update;
    return run_sjd_on_terminal(command);
  }();
  INFO(shown.out);
  REQUIRE(shown.exit_code == 0);
  // Updated within an image (some image in flight partly done), and at the end.
  CHECK(std::regex_search(shown.out, std::regex(R"(\r\[\d/5\] \d generated, 2 in flight \([1-9]\d?% on average\), ETA)")));
  CHECK_THAT(shown.out, Catch::Contains("[5/5] 5 generated, 0 in flight"));
  CHECK_THAT(shown.out, Catch::Contains("images/s) at batch size 2"));  // the closing summary
  CHECK_THAT(shown.out, Catch::Contains("batch: method sjd (") && Catch::Contains("[exact]"));  // what was run
  for (const auto& record : manifest_records(dir / "out" / "manifest.jsonl")) CHECK(record["exactness"] == "exact");
  const auto quiet = run_sjd_on_terminal(batch(dir / "prompts.txt", dir / "quiet", "--method sjd --batch-size 2 --quiet"));
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.out.find("in flight") == std::string::npos);
}

TEST_CASE("compare --batch-size: each method's runs share a batch and give the batch-1 images", "[cli][batch][compare]") {
  TempDir dir("batched_compare");
  write_file(dir / "prompts.txt", kPrompts);
  std::map<int, std::vector<std::filesystem::path>> made;
  for (int b : {1, 4}) {
    const auto out = dir / ("b" + std::to_string(b));
    const auto r = run_sjd_limited("compare --model " + shell_quoted(default_model()) + " --prompts " +
                                   shell_quoted(dir / "prompts.txt") + " --limit 3 --seeds 2 --methods ar,scd-mc,sjd-pac" +
                                   " --window 6 --pd-k 2 --pd-depth 2 --batch-size " + std::to_string(b) +
                                   " --out-dir " + shell_quoted(out));
    INFO("B=" << b << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    made[b] = pngs(out / "runs");
    REQUIRE(made[b].size() == 3 * 2 * 3);
    const std::string manifest = read_file(out / "runs" / "manifest.jsonl");
    CHECK(manifest.find("\"batch_size\":" + std::to_string(b)) != std::string::npos);
  }
  for (size_t i = 0; i < made[1].size(); ++i) {
    INFO(made[4][i].filename());
    CHECK(made[4][i].filename() == made[1][i].filename());
    CHECK(pixel_bytes(made[4][i]) == pixel_bytes(made[1][i]));
  }
}

TEST_CASE("compare --batch-size: a batch too large for the memory exits 2 with the estimate, before any run",
          "[cli][batch][compare]") {
  TempDir dir("batched_compare_memory");
  const auto r = run_sjd_limited("compare --model " + shell_quoted(default_model()) +
                                 " -p 'a small red square' --methods ar,sjd --batch-size 1024 --max-memory 20M" +
                                 " --out-dir " + shell_quoted(dir / "out"));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("for a batch of 1024"));
  CHECK_FALSE(std::filesystem::exists(dir / "out"));  // no run was made, and the folders it made are gone
}
