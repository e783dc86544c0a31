// Which prompts a shard takes, where its shard number comes from (--shard, a
// Slurm job array, a Kubernetes Indexed Job) and how its manifest is named.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/batch_manifest.h"
#include "engine/batch_shards.h"
#include "engine/batch_status.h"
#include "engine/bundle.h"
#include "testing/test_support.h"

using namespace sjd::engine;

namespace {

// A getenv over a fixed set of variables.
EnvLookup environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

}  // namespace

TEST_CASE("shards: every index belongs to exactly one shard, strided", "[batch][shards]") {
  for (int64_t count = 1; count <= 5; ++count) {
    for (int64_t image = 0; image < 23; ++image) {
      int owners = 0;
      for (int64_t index = 0; index < count; ++index) owners += Shard{index, count}.owns(image) ? 1 : 0;
      CHECK(owners == 1);
      CHECK(Shard{image % count, count}.owns(image));
    }
  }
  const Shard shard{1, 3};  // owns 1, 4, 7, 10
  CHECK(shard.owned_in(0, 11) == 4);
  CHECK(shard.owned_in(0, 10) == 3);
  CHECK(shard.owned_in(2, 5) == 1);
  CHECK(shard.owned_in(5, 5) == 0);
  CHECK(shard.owned_in(0, 1) == 0);
  CHECK(Shard{}.owned_in(3, 9) == 6);
}

TEST_CASE("shards: --shard parses I/N and refuses anything else", "[batch][shards]") {
  CHECK(parse_shard("0/1").count == 1);
  const Shard s = parse_shard("2/3");
  CHECK(s.index == 2);
  CHECK(s.count == 3);
  CHECK(s.describe() == "2/3");
  for (const char* bad : {"3/3", "1/0", "-1/3", "1", "1/", "/3", "a/b", "1/3/4", "1 /3", "0/10000000", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_shard(bad), InputError);
  }
  CHECK_THROWS_WITH(parse_shard("4/4"), Catch::Contains("--shard '4/4'") && Catch::Contains("0 <= I < N"));
}

TEST_CASE("shards: a Slurm job array gives the shard, its first task id taken into account", "[batch][shards]") {
  CHECK_FALSE(shard_from_environment(environment({}), 0));
  CHECK_FALSE(shard_from_environment(environment({{"SLURM_JOB_ID", "77"}}), 0));  // a job, but no array
  const auto first = shard_from_environment(
      environment({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                   {"SLURM_ARRAY_TASK_MAX", "3"}}),
      0);
  REQUIRE(first);
  CHECK(first->shard.describe() == "0/4");
  CHECK_THAT(first->source, Catch::Contains("SLURM_ARRAY_TASK_ID=0"));
  // --array=4-6: task 5 is the second shard of three.
  const auto offset = shard_from_environment(
      environment({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "4"},
                   {"SLURM_ARRAY_TASK_MAX", "6"}}),
      0);
  REQUIRE(offset);
  CHECK(offset->shard.describe() == "1/3");
  // --array=0-8:4 runs 0, 4, 8.
  const auto stepped = shard_from_environment(
      environment({{"SLURM_ARRAY_TASK_ID", "8"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                   {"SLURM_ARRAY_TASK_MAX", "8"}, {"SLURM_ARRAY_TASK_STEP", "4"}}),
      0);
  REQUIRE(stepped);
  CHECK(stepped->shard.describe() == "2/3");
}

TEST_CASE("shards: a Slurm array whose ids are no shard numbers is refused", "[batch][shards]") {
  // --array=1,4,9: three tasks, ids not evenly spaced.
  CHECK_THROWS_WITH(
      shard_from_environment(environment({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "3"},
                                          {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_MAX", "9"}}),
                             0),
      Catch::Contains("not evenly spaced") && Catch::Contains("--shard"));
  CHECK_THROWS_WITH(shard_from_environment(environment({{"SLURM_ARRAY_TASK_ID", "2"}}), 0),
                    Catch::Contains("SLURM_ARRAY_TASK_COUNT"));
  // A task id past the array's ids is said as such (it was said to be "not evenly spaced").
  CHECK_THROWS_WITH(
      shard_from_environment(environment({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "2"},
                                          {"SLURM_ARRAY_TASK_MIN", "0"}}),
                             0),
      Catch::Equals("SLURM_ARRAY_TASK_ID=5 is outside the Slurm array's task ids (0..1); pass --shard I/N"));
  CHECK_THROWS_WITH(
      shard_from_environment(environment({{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}), 0),
      Catch::Contains("SLURM_ARRAY_TASK_ID='x'"));
}

TEST_CASE("shards: a Kubernetes Indexed Job gives the shard, with its count from the flag or env", "[batch][shards]") {
  const EnvLookup job = environment({{"JOB_COMPLETION_INDEX", "2"}, {"SJD_SHARD_COUNT", "5"}});
  const auto from_env = shard_from_environment(job, 0);
  REQUIRE(from_env);
  CHECK(from_env->shard.describe() == "2/5");
  CHECK_THAT(from_env->source, Catch::Contains("JOB_COMPLETION_INDEX=2") && Catch::Contains("SJD_SHARD_COUNT=5"));
  const auto from_flag = shard_from_environment(job, 3);
  REQUIRE(from_flag);
  CHECK(from_flag->shard.describe() == "2/3");  // the flag wins
  CHECK_THROWS_WITH(shard_from_environment(environment({{"JOB_COMPLETION_INDEX", "2"}}), 0),
                    Catch::Contains("--shard-count"));
  CHECK_THROWS_WITH(shard_from_environment(environment({{"JOB_COMPLETION_INDEX", "3"}}), 3),
                    Catch::Contains("not below --shard-count=3"));
}

TEST_CASE("shards: --shard wins over the environment, which is said in the log", "[batch][shards]") {
  const EnvLookup slurm = environment({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}});
  std::ostringstream log;
  CHECK(choose_shard("0/3", 0, slurm, log).describe() == "0/3");
  CHECK(log.str().empty());
  CHECK(choose_shard("", 0, slurm, log).describe() == "1/2");
  CHECK(log.str() == "batch: shard 1/2 (from SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_MIN=0, "
                     "SLURM_ARRAY_TASK_COUNT=2)\n");
  CHECK(choose_shard("", 0, environment({}), log).count == 1);
  CHECK_THROWS_WITH(choose_shard("", 4, environment({}), log), Catch::Contains("needs JOB_COMPLETION_INDEX"));
  CHECK_THROWS_WITH(choose_shard("", -1, environment({}), log), Catch::Contains("--shard-count must be positive"));
  // Both flags: they must agree (a silent --shard 0/2 beside --shard-count 3 ran half the prompts, not a third).
  CHECK(choose_shard("1/3", 3, environment({}), log).describe() == "1/3");
  CHECK_THROWS_WITH(choose_shard("0/2", 3, environment({}), log),
                    Catch::Contains("--shard 0/2 and --shard-count 3 give different numbers of shards"));
}

TEST_CASE("shards: manifest names round-trip, and only canonical ones count", "[batch][shards]") {
  CHECK(manifest_name(Shard{}) == "manifest.jsonl");
  CHECK(manifest_name(Shard{1, 3}) == "manifest.1-of-3.jsonl");
  for (const Shard shard : {Shard{}, Shard{0, 2}, Shard{11, 12}}) {
    const auto back = shard_of_manifest(manifest_name(shard));
    REQUIRE(back);
    CHECK(back->index == shard.index);
    CHECK(back->count == shard.count);
  }
  for (const char* other : {"manifest.01-of-3.jsonl", "manifest.3-of-3.jsonl", "manifest.0-of-1.jsonl",
                            "manifest.1-of-3.json", "manifest.jsonl.bak", "xmanifest.jsonl", "manifest.a-of-b.jsonl"}) {
    INFO(other);
    CHECK_FALSE(shard_of_manifest(other));
  }
  sjd::testing::TempDir dir("shard_manifests");
  for (const char* name : {"manifest.1-of-2.jsonl", "manifest.jsonl", "notes.jsonl", "manifest.0-of-2.jsonl"}) {
    sjd::testing::write_file(dir / name, "");
  }
  const auto listed = list_manifests(dir.path());
  REQUIRE(listed.size() == 3);
  CHECK(listed[0].filename() == "manifest.0-of-2.jsonl");
  CHECK(listed[2].filename() == "manifest.jsonl");
}

TEST_CASE("manifest status: index ranges", "[batch][status]") {
  CHECK(index_ranges(ranges_of({})).empty());
  CHECK(index_ranges(ranges_of({4})) == "4");
  CHECK(index_ranges(ranges_of({1, 2, 3, 7, 9, 10})) == "1-3, 7, 9-10");
  CHECK(index_ranges({{0, 1}, {5, 5}, {7, 9}}) == "0-1, 5, 7-9");
}

TEST_CASE("manifest status: the table's columns stay apart whatever the counts and shard names", "[batch][status]") {
  BatchStatus status;
  status.images = 268435456;  // nine digits: with fixed 8-wide columns "8" and "268435448" ran together
  status.shards.push_back({Shard{123456, 999999}, 8, 0, 268435448});  // a name past the 12-wide column
  status.overall = {Shard{0, 1}, 8, 0, 268435448};
  std::ostringstream out;
  print_batch_status(status, out);
  std::istringstream lines(out.str());
  std::string line;
  for (int row = 0; row < 3 && std::getline(lines, line); ++row) {
    INFO(line);
    std::istringstream fields(line);
    std::vector<std::string> words;
    for (std::string word; fields >> word;) words.push_back(word);
    CHECK(words.size() == 4);  // name, done, failed, missing
  }
  CHECK_THAT(out.str(), Catch::Contains("all") && Catch::Contains("268435448"));
}

TEST_CASE("manifest status: lines of other prompts than the prompt file's, and past its end, are told apart",
          "[batch][status]") {
  // `sjd manifest DIR --prompts OTHER` counted images by index alone: another file's images were "done".
  sjd::testing::TempDir dir("status_other_prompts");
  const auto failed = [](int index, const std::string& prompt) {
    nlohmann::json line{{"index", index}, {"status", "failed"}, {"error", "x"}};
    record_prompt(line, prompt);
    return line.dump() + "\n";
  };
  const std::string long_prompt(size_t{3} << 20, 'a');  // failed past 1 MiB: its line keeps the first KiB and the size
  sjd::testing::write_file(dir / "manifest.jsonl",
                           failed(0, "a cat") + failed(1, "a dog") + failed(2, "a fox") + failed(4, long_prompt) +
                               failed(5, "an owl") +
                               nlohmann::json{{"index", 3}, {"status", "failed"}}.dump() + "\n");  // no prompt: older
  CHECK(sjd::testing::read_file(dir / "manifest.jsonl").size() < 2000);
  const std::vector<std::string> prompts = {"a cat", "a dog", "a cow", "a hen", long_prompt};
  std::ostringstream log;
  const BatchStatus status = batch_status(dir.path(), 5, log, &prompts);
  CHECK(index_ranges(status.failed) == "0-1, 3-4");
  CHECK(status.other_prompt_failed == std::vector<int64_t>{2});
  CHECK(status.other_prompt_done.empty());
  CHECK(index_ranges(status.missing) == "2");
  CHECK(status.past_end == 1);
  std::ostringstream out;
  print_batch_status(status, out);
  CHECK_THAT(out.str(), Catch::Contains("failed with other prompts than the prompt file's") &&
                            Catch::Contains("makes them): 2\n") &&
                            Catch::Contains("past the end: 1 image(s) recorded from index 5"));
  // A cut prompt is told from another long one of the same first KiB by its size.
  const std::vector<std::string> longer = {"a cat", "a dog", "a fox", "a hen", long_prompt + "a"};
  CHECK(batch_status(dir.path(), 5, log, &longer).other_prompt_failed == std::vector<int64_t>{4});
  // Without the prompts (batch.json's count) every line counts by its index.
  const BatchStatus by_index = batch_status(dir.path(), 5, log);
  CHECK(index_ranges(by_index.failed) == "0-4");
  CHECK(by_index.other_prompt_failed.empty());
}
