#pragma once
// Splitting one prompt file over many `sjd batch` processes: shard I of N takes
// the prompts whose index i has i mod N == I. Strided rather than in contiguous
// blocks because (a) which shard owns an index never depends on the prompt count,
// so appending prompts or changing --limit keeps every finished image where it
// was, and (b) prompt files are often sorted (PartiPrompts by category, GenEval
// by task), and strides spread the slow prompts evenly over the shards.
// The seed rule is the unsharded one (image i uses --seed + i), so the union of
// the N shards is the unsharded run, byte for byte.
//
// Each shard appends to its own manifest, "manifest.I-of-N.jsonl" (an unsharded
// run: "manifest.jsonl"); readers take every manifest of the folder together.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace sjd::engine {

struct Shard {
  int64_t index = 0;
  int64_t count = 1;

  bool owns(int64_t image) const { return image % count == index; }
  // How many of the images [begin, end) this shard owns.
  int64_t owned_in(int64_t begin, int64_t end) const;
  std::string describe() const;  // "1/3"
};

// "I/N" with 0 <= I < N; anything else is an InputError naming `flag`.
Shard parse_shard(const std::string& text, const std::string& flag = "--shard");

// The shard a scheduler gave this process, read through `env` (a getenv):
//  - a Slurm job array: SLURM_ARRAY_TASK_ID, _COUNT, _MIN (and _MAX, _STEP:
//    indices must be evenly spaced, "--array=4-7" gives shards 0..3 of 4);
//  - a Kubernetes Indexed Job: JOB_COMPLETION_INDEX, with the count from
//    `count_flag` (--shard-count, 0 when not given) or SJD_SHARD_COUNT.
// nullopt outside both. `source` says which variables it came from.
struct DetectedShard {
  Shard shard;
  std::string source;  // "SLURM_ARRAY_TASK_ID=5 of SLURM_ARRAY_TASK_MIN=4..." for the log
};
using EnvLookup = std::function<const char*(const char*)>;
std::optional<DetectedShard> shard_from_environment(const EnvLookup& env, int64_t count_flag);

// The shard of this process: `--shard` (`flag`, "" when not given), else the
// scheduler's (said on `log`), else the whole file. `count_flag`: --shard-count.
Shard choose_shard(const std::string& flag, int64_t count_flag, const EnvLookup& env, std::ostream& log);

// The manifest a shard appends to, and the shard a manifest file name belongs to
// (nullopt: not a manifest; Shard{0, 1}: "manifest.jsonl").
std::string manifest_name(const Shard& shard);
std::optional<Shard> shard_of_manifest(const std::string& file_name);

// Every manifest of a batch folder, in name order.
std::vector<std::filesystem::path> list_manifests(const std::filesystem::path& dir);

}  // namespace sjd::engine
