// One prompt file over many `sjd batch` processes: shards running at once into
// one folder give the unsharded run's images byte for byte, each made once; the
// shard comes from a Slurm array or a Kubernetes Indexed Job; a killed shard
// resumes; a stale claim of another machine is taken over; `sjd manifest`
// reports and merges.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_runner.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

std::string scene_prompts(int count) {
  const char* colours[] = {"red", "green", "blue", "yellow"};
  const char* shapes[] = {"circle", "square", "ring"};
  std::string text;
  for (int i = 0; i < count; ++i) {
    text += std::string("a small ") + colours[i % 4] + " " + shapes[i % 3] + " on the left\n";
  }
  return text;
}

// The PNGs of a folder: name -> bytes.
std::map<std::string, std::string> images_in(const std::filesystem::path& dir) {
  std::map<std::string, std::string> images;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".png") images[entry.path().filename().string()] = read_file(entry.path());
  }
  return images;
}

// How often each index was made ("ok"), over every manifest of the folder.
std::map<int64_t, int> times_made(const std::filesystem::path& dir) {
  std::map<int64_t, int> made;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("manifest", 0) != 0) continue;
    for (const auto& record : manifest_records(entry.path())) {
      if (record["status"] == "ok") ++made[record["index"].get<int64_t>()];
    }
  }
  return made;
}

// The command's exit code, and a text its stdout or stderr holds.
void check_result(const CommandResult& result, int exit_code, const std::string& text) {
  INFO(result.out << result.err);
  CHECK(result.exit_code == exit_code);
  CHECK_THAT(result.out + result.err, Catch::Contains(text));
}

// The merged manifest without its timings.
std::vector<nlohmann::json> merged_without_timings(const std::filesystem::path& dir) {
  std::vector<nlohmann::json> records = manifest_records(dir / "manifest.jsonl");
  for (auto& record : records) record.erase("seconds"), record.erase("seconds_by_stage");
  return records;
}

// Runs the commands at once, each in the background; returns their exit codes. One
// thread each: OpenMP threads spinning on more threads than cores take minutes.
std::vector<int> run_concurrently(const std::vector<std::string>& args, const TempDir& dir) {
  std::string script = "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string tag = std::to_string(i);
    script += "(OMP_NUM_THREADS=1 " + (build_dir() / "sjd").string() + " " + args[i] + " >" +
              shell_quoted(dir / ("log" + tag)) +
              " 2>&1; echo $? >" + shell_quoted(dir / ("rc" + tag)) + ") & ";
  }
  script += "wait)";
  REQUIRE(std::system(script.c_str()) == 0);
  std::vector<int> codes;
  for (size_t i = 0; i < args.size(); ++i) {
    INFO(read_file(dir / ("log" + std::to_string(i))));
    codes.push_back(std::stoi(read_file(dir / ("rc" + std::to_string(i)))));
  }
  return codes;
}

}  // namespace

TEST_CASE("batch: shards run at once into one folder make the unsharded images byte for byte, once each",
          "[cli][batch][scale]") {
  TempDir dir("batch_shards");
  const int prompts = 7;
  write_file(dir / "prompts.txt", scene_prompts(prompts));
  const auto reference = dir / "unsharded";
  REQUIRE(run_sjd_limited(batch_args(dir / "prompts.txt", reference)).exit_code == 0);
  const auto expected = images_in(reference);
  REQUIRE(expected.size() == static_cast<size_t>(prompts));
  REQUIRE(run_sjd("manifest " + shell_quoted(reference) + " --merge").exit_code == 0);
  for (int shards = 1; shards <= 3; ++shards) {
    INFO("shards: " << shards);
    const auto out = dir / ("shards" + std::to_string(shards));
    std::vector<std::string> commands;
    for (int shard = 0; shard < shards; ++shard) {
      commands.push_back(batch_args(dir / "prompts.txt", out) + " --shard " + std::to_string(shard) + "/" +
                         std::to_string(shards));
    }
    for (int code : run_concurrently(commands, dir)) CHECK(code == 0);
    CHECK(images_in(out) == expected);
    const auto made = times_made(out);
    CHECK(made.size() == static_cast<size_t>(prompts));
    for (const auto& [index, times] : made) CHECK(times == 1);
    if (shards > 1) {
      // Each shard wrote its own manifest, of its own indices only, and all of them.
      std::set<int64_t> indices, own;
      for (const auto& record : manifest_records(out / ("manifest.1-of-" + std::to_string(shards) + ".jsonl"))) {
        indices.insert(record["index"].get<int64_t>());
      }
      for (int64_t i = 1; i < prompts; i += shards) own.insert(i);
      CHECK(indices == own);
    }
    check_result(run_sjd("manifest " + shell_quoted(out)), 0, "images: 7, complete");
    check_result(run_sjd("manifest " + shell_quoted(out) + " --merge"), 0, "merged 7 done and 0 failed");
    CHECK(merged_without_timings(out) == merged_without_timings(reference));
    CHECK(times_made(out).size() == static_cast<size_t>(prompts));  // the shard manifests were folded in
    // A re-run after the merge finds everything done.
    const std::string again = batch_args(dir / "prompts.txt", out) + " --shard 0/" + std::to_string(shards);
    check_result(run_sjd_limited(again), 0, "0 generated");
  }
}

TEST_CASE("batch: the shard comes from a Slurm array or a Kubernetes Indexed Job, and is said", "[cli][batch][scale]") {
  TempDir dir("batch_shard_env");
  write_file(dir / "prompts.txt", scene_prompts(5));
  const auto out = dir / "out";
  const std::string batch = batch_args(dir / "prompts.txt", out);
  // --array=4-6: task 5 is shard 1 of 3 (prompts 1 and 4).
  check_result(run_sjd_env(
                   "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_COUNT=3",
                   batch),
               0, "shard 1/3 (from SLURM_ARRAY_TASK_ID=5, SLURM_ARRAY_TASK_MIN=4");
  std::set<int64_t> indices;
  for (const auto& record : manifest_records(out / "manifest.1-of-3.jsonl")) {
    indices.insert(record["index"].get<int64_t>());
  }
  CHECK(indices == std::set<int64_t>{1, 4});
  // Not finished: the status names what is missing, per shard.
  check_result(run_sjd("manifest " + shell_quoted(out)), 1, "missing: 0, 2-3");
  check_result(run_sjd_env("JOB_COMPLETION_INDEX=2 SJD_SHARD_COUNT=3", batch), 0,
               "shard 2/3 (from JOB_COMPLETION_INDEX=2, SJD_SHARD_COUNT=3)");
  CHECK(manifest_records(out / "manifest.2-of-3.jsonl").size() == 1);
  // --shard wins over the environment.
  check_result(run_sjd_env("JOB_COMPLETION_INDEX=2 SJD_SHARD_COUNT=3", batch + " --shard 0/3"), 0, "2 generated");
  CHECK(manifest_records(out / "manifest.0-of-3.jsonl").size() == 2);
  check_result(run_sjd("manifest " + shell_quoted(out)), 0, "images: 5, complete");
  check_result(run_sjd_env("JOB_COMPLETION_INDEX=1", batch), 2, "--shard-count");
  // A shard that owns none of the prompts names no manifest file it never wrote.
  const auto none = run_sjd(batch_args(dir / "prompts.txt", dir / "none") + " --shard 5/6");
  check_result(none, 0, "0 generated, 0 already done, 0 failed; no manifest written (no image was this run's to make)");
  CHECK_FALSE(std::filesystem::exists(dir / "none" / "manifest.5-of-6.jsonl"));
  CHECK_THAT(none.err, Catch::Contains("batch: batch size 8 (auto: 8 on a CPU, 16 on a GPU, halved until the estimate "
                                       "fits the memory)"));
}

TEST_CASE("batch: a killed shard resumed makes only what it had not made", "[cli][batch][scale]") {
  TempDir dir("batch_shard_killed");
  write_file(dir / "prompts.txt", scene_prompts(24));
  const auto out = dir / "out";
  const std::string shard = batch_args(dir / "prompts.txt", out) + " --shard 1/2";
  const std::string start = (build_dir() / "sjd").string() + " " + shard + " >" + shell_quoted(dir / "killed.log") +
                            " 2>&1 & echo $! >" + shell_quoted(dir / "pid");
  REQUIRE(std::system(start.c_str()) == 0);
  const pid_t pid = std::stoi(read_file(dir / "pid"));
  const auto manifest = out / "manifest.1-of-2.jsonl";
  for (int i = 0; i < 6000 && manifest_records(manifest).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(::kill(pid, SIGKILL) == 0);  // still running: it has 12 images to make
  for (int i = 0; i < 500 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const size_t made_before = manifest_records(manifest).size();
  INFO("made before the kill: " << made_before);
  REQUIRE(made_before >= 1);
  REQUIRE(made_before < 12);
  check_result(run_sjd_limited(shard), 0, std::to_string(12 - made_before) + " generated, " +
                                          std::to_string(made_before) + " already done");
  const auto made = times_made(out);
  CHECK(made.size() == 12);
  for (const auto& [index, times] : made) {
    CHECK(index % 2 == 1);
    CHECK(times == 1);
  }
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    INFO(entry.path().filename().string());
    CHECK(entry.path().filename().string().rfind(".claim.", 0) != 0);  // the killed run's claim was taken over
  }
}

TEST_CASE("batch: a stale claim of another machine is taken over, a live one left to its owner",
          "[cli][batch][scale]") {
  TempDir dir("batch_foreign_claims");
  write_file(dir / "prompts.txt", scene_prompts(3));
  const auto out = dir / "out";
  std::filesystem::create_directories(out);
  const auto claim = [&](int index, const std::string& host) {
    write_file(out / (".claim." + std::to_string(index)),
               nlohmann::json{{"host", host}, {"pid", 4242}, {"token", "t"}}.dump());
  };
  claim(1, "a-node-that-died");
  std::filesystem::last_write_time(out / ".claim.1",
                                   std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  claim(2, "a-busy-node");  // touched just now: its owner is at work
  const std::string batch = batch_args(dir / "prompts.txt", out);
  check_result(run_sjd_limited(batch), 0, "2 generated, 0 already done, 0 failed, 1 made by another process");
  CHECK_FALSE(std::filesystem::exists(out / ".claim.1"));
  check_result(run_sjd("manifest " + shell_quoted(out)), 1, "missing: 2");
  // Its owner never comes back: once the claim is stale, a re-run makes the image.
  std::filesystem::last_write_time(out / ".claim.2",
                                   std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  check_result(run_sjd_limited(batch), 0, "1 generated, 2 already done");
  CHECK(run_sjd("manifest " + shell_quoted(out)).exit_code == 0);
}

TEST_CASE("batch: --claim-timeout sets how long another machine's untouched claim is left to it", "[cli][batch][scale]") {
  TempDir dir("batch_claim_timeout");
  write_file(dir / "prompts.txt", scene_prompts(1));
  const auto out = dir / "out";
  std::filesystem::create_directories(out);
  write_file(out / ".claim.0", nlohmann::json{{"host", "a-node-gone-quiet"}, {"pid", 4242}, {"token", "t"}}.dump());
  std::filesystem::last_write_time(out / ".claim.0",
                                   std::filesystem::file_time_type::clock::now() - std::chrono::minutes(2));
  const std::string batch = batch_args(dir / "prompts.txt", out);
  // Untouched for 2 minutes: within the default 10, its owner may still be at work.
  check_result(run_sjd_limited(batch), 0, "0 generated, 0 already done, 0 failed, 1 made by another process");
  check_result(run_sjd_limited(batch + " --claim-timeout 60"), 0, "1 generated, 0 already done, 0 failed");
  CHECK_FALSE(std::filesystem::exists(out / ".claim.0"));
}

TEST_CASE("manifest: a folder that is no batch folder is refused", "[cli][batch][scale]") {
  TempDir dir("manifest_bad");
  check_result(run_sjd("manifest " + shell_quoted(dir / "nothing")), 2, "nothing: no such folder");
  check_result(run_sjd("manifest " + shell_quoted(dir.path())), 2, "batch.json: not found");
  write_file(dir / "batch.json", "{\"images\": -3}");
  check_result(run_sjd("manifest " + shell_quoted(dir / "batch.json")), 2, "batch.json: not a folder");
  check_result(run_sjd("manifest " + shell_quoted(dir.path())), 2, "\"images\" is not an integer from 0 to 268435456");
  // Past what a prompt file can hold (it once wrapped to a negative count and read "complete").
  write_file(dir / "batch.json", "{\"images\": 9300000000000000000}");
  check_result(run_sjd("manifest " + shell_quoted(dir.path())), 2, "(no prompt file holds more); pass --prompts FILE");
  write_file(dir / "prompts.txt", "a red circle\na blue ring\n");
  check_result(run_sjd("manifest " + shell_quoted(dir.path()) + " --prompts " + shell_quoted(dir / "prompts.txt")), 1,
               "missing: 0-1");
  // --limit counts prompts of --prompts; alone it was ignored.
  check_result(run_sjd("manifest " + shell_quoted(dir.path()) + " --limit 1"), 2, "--limit counts the first N prompts");
  // A compare folder is named as one: --prompts counted its prompts as batch images, all missing.
  std::filesystem::create_directories(dir / "cmp" / "runs");
  write_file(dir / "cmp" / "compare.json", "{}");
  check_result(run_sjd("manifest " + shell_quoted(dir / "cmp") + " --prompts " + shell_quoted(dir / "prompts.txt")), 2,
               "holds a compare run (compare.json, runs/), and sjd manifest reads batch folders");
}

TEST_CASE("batch: a run of fewer prompts into a folder keeps the earlier run's image count", "[cli][batch][scale]") {
  TempDir dir("batch_fewer");
  write_file(dir / "prompts.txt", scene_prompts(3));
  const auto out = dir / "out";
  const std::string batch = batch_args(dir / "prompts.txt", out);
  check_result(run_sjd_limited(batch + " --limit 2"), 0, "2 generated");
  // --limit 1 on the way back used to rewrite batch.json to 1 image, and the manifest read "complete".
  check_result(run_sjd_limited(batch + " --limit 1"), 0,
               "batch.json keeps the 2 images of an earlier run (this run has 1)");
  check_result(run_sjd("manifest " + shell_quoted(out)), 0, "images: 2, complete");
  check_result(run_sjd_limited(batch), 0, "1 generated, 2 already done");
  check_result(run_sjd("manifest " + shell_quoted(out)), 0, "images: 3, complete");
  write_file(dir / "prompts.txt", scene_prompts(1));  // shortened
  run_sjd_limited(batch);
  check_result(run_sjd("manifest " + shell_quoted(out)), 0, "images: 3, complete");
}

TEST_CASE("manifest: the status of a batch of many images costs what its finished images cost", "[cli][batch][scale]") {
  // 200 million missing images used to be listed one by one: 1.6 GB, and two billion ran out of memory.
  TempDir dir("manifest_many");
  write_file(dir / "batch.json", "{\"images\": 200000000}");
  write_file(dir / "manifest.0-of-3.jsonl",
             nlohmann::json{{"index", 6}, {"status", "failed"}, {"error", "x"}}.dump() + "\n" +
                 nlohmann::json{{"index", 7}, {"status", "failed"}, {"error", "x"}}.dump() + "\n");
  const auto status = run_sjd_limited("manifest " + shell_quoted(dir.path()));
  check_result(status, 1, "missing: 0-5, 8-199999999");
  CHECK_THAT(status.out, Catch::Contains("failed: 6-7") && Catch::Contains("images: 200000000\n"));
  // Shards of 3: 66666667 images for shard 0, 66666667 for 1 and 66666666 for 2; 6 is shard 0's, 7 shard 1's.
  // Columns as wide as the nine-digit count needs, plus a space ("all 0 2199999998" ran them together).
  CHECK_THAT(status.out, Catch::Contains("0/3                  0         1   66666666") &&
                             Catch::Contains("1/3                  0         1   66666666") &&
                             Catch::Contains("2/3                  0         0   66666666") &&
                             Catch::Contains("all                  0         2  199999998"));
  // A merge refused for a manifest it cannot lock (a link) leaves no empty manifest.jsonl behind.
  write_file(dir / "elsewhere.jsonl", "");
  std::filesystem::create_symlink(dir / "elsewhere.jsonl", dir / "manifest.1-of-3.jsonl");
  const auto merge = run_sjd("manifest " + shell_quoted(dir.path()) + " --merge");
  CHECK(merge.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(dir / "manifest.jsonl"));
  CHECK(std::filesystem::exists(dir / "manifest.0-of-3.jsonl"));
}

TEST_CASE("batch: a shard with other settings than its sibling shards is refused", "[cli][batch][scale]") {
  TempDir dir("batch_shard_conflict");
  write_file(dir / "prompts.txt", scene_prompts(4));
  const std::string batch = batch_args(dir / "prompts.txt", dir / "out");
  REQUIRE(run_sjd_limited(batch + " --shard 0/2").exit_code == 0);
  // Shard 1 makes other images than shard 0, but with another seed the folder would mix two runs. The refusal names
  // the sibling's manifest line (images are recorded as they finish, so which line depends on the model).
  const auto refused = run_sjd_limited(batch + " --shard 1/2 --seed 5");
  check_result(refused, 2, "was made with seed 0 (now 5)");
  CHECK_THAT(refused.err, Catch::Contains("manifest.0-of-2.jsonl:") && Catch::Contains(": image 00000_"));
  CHECK_FALSE(std::filesystem::exists(dir / "out" / "manifest.1-of-2.jsonl"));
}

TEST_CASE("manifest: a merge keeps the lines it cannot read, and reads a last line without its newline",
          "[cli][batch][scale]") {
  // A merge removes the shard manifests it folds in: the lines no reader trusts used to go with them.
  TempDir dir("manifest_merge_unreadable");
  write_file(dir / "batch.json", "{\"images\": 4}");
  const std::string failed = nlohmann::json{{"index", 0}, {"status", "failed"}, {"error", "x"}}.dump();
  const std::string untrusted = nlohmann::json{{"index", -3}, {"status", "failed"}}.dump();
  write_file(dir / "manifest.0-of-2.jsonl", failed + "\n{\"index\": 2, \"stat\n" + untrusted + "\n");
  // No newline at its end (a hand edit): with every manifest locked, no one is writing it.
  write_file(dir / "manifest.1-of-2.jsonl", nlohmann::json{{"index", 1}, {"status", "failed"}, {"error", "y"}}.dump());
  check_result(run_sjd("manifest " + shell_quoted(dir.path()) + " --merge"), 1,
               "merged 0 done and 2 failed image(s)");
  CHECK_FALSE(std::filesystem::exists(dir / "manifest.0-of-2.jsonl"));
  CHECK_FALSE(std::filesystem::exists(dir / "manifest.1-of-2.jsonl"));
  const std::string merged = read_file(dir / "manifest.jsonl");
  CHECK_THAT(merged, Catch::Contains("{\"index\": 2, \"stat\n") && Catch::Contains(untrusted + "\n") &&
                         Catch::Contains("\"error\":\"y\""));
  // A second merge neither loses nor repeats them.
  check_result(run_sjd("manifest " + shell_quoted(dir.path()) + " --merge"), 1, "2 line(s) it cannot read kept");
  CHECK(read_file(dir / "manifest.jsonl") == merged);
}
