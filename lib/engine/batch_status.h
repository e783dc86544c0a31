#pragma once
// `sjd manifest DIR`: how far a batch folder is -- done, failed and missing
// images per shard and overall, with the indices still missing -- and `--merge`,
// which folds every manifest of the folder into one manifest.jsonl ordered by
// index (a finished sharded run then has the manifest an unsharded one has,
// timings aside).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/batch_shards.h"

namespace sjd::engine {

// batch.json: how many images the run in the folder makes (written by every
// `sjd batch` start, so the status knows what is missing without the prompt file).
void record_batch_size(const std::filesystem::path& dir, const std::filesystem::path& prompts, int64_t images);
// The image count batch.json records; InputError when it is absent or damaged.
int64_t recorded_batch_size(const std::filesystem::path& dir);

struct ShardStatus {
  Shard shard;
  int64_t done = 0;
  int64_t failed = 0;
  int64_t missing = 0;
};

// Indices first..last, both included.
struct IndexRange {
  int64_t first = 0;
  int64_t last = 0;
  bool operator==(const IndexRange& other) const { return first == other.first && last == other.last; }
};

struct BatchStatus {
  int64_t images = 0;                // the run's image count
  std::vector<ShardStatus> shards;   // one row per shard of every layout (N) whose manifests are in the folder
  ShardStatus overall;               // Shard{0, 1}
  std::vector<IndexRange> failed;    // indices whose latest attempt failed
  std::vector<IndexRange> missing;   // indices neither done nor failed (or whose image is damaged)
  int64_t past_end = 0;              // lines of indices from `images` on (made from a longer prompt file)
  // Indices whose line records another prompt than the prompt file's: made (a batch run with the file refuses
  // the folder) or failed (it makes them).
  std::vector<int64_t> other_prompt_done;
  std::vector<int64_t> other_prompt_failed;
  bool complete() const { return failed.empty() && missing.empty(); }
};

// Reads every manifest of `dir` (an image counts as done only while its PNG is intact).
// Its time and memory grow with the images finished, not with `images`: a
// batch.json naming two billion images costs what its manifests cost. Given the prompt file's prompts
// (`images` of them), an image whose line records another prompt is not this file's: it counts as missing,
// and is listed in other_prompt_done or other_prompt_failed.
BatchStatus batch_status(const std::filesystem::path& dir, int64_t images, std::ostream& log,
                         const std::vector<std::string>* prompts = nullptr);
void print_batch_status(const BatchStatus& status, std::ostream& out);

// Sorted, distinct indices as runs of consecutive ones.
std::vector<IndexRange> ranges_of(const std::vector<int64_t>& sorted_indices);
// "3, 7-9, 12".
std::string index_ranges(const std::vector<IndexRange>& ranges);

struct MergeResult {
  int64_t done = 0;
  int64_t failed = 0;
  int64_t shard_manifests_removed = 0;
  int64_t ignored_lines = 0;  // carried over verbatim
};
// Writes manifest.jsonl (atomically): for each index, its finished line, else
// its latest failed line, in index order, then every line the readers ignore
// (unreadable, or fields that cannot be trusted) as it was; then removes the shard manifests it
// folded in. Every manifest is locked meanwhile, so a run still appending loses
// no line: it waits and appends to the new file.
MergeResult merge_manifests(const std::filesystem::path& dir, std::ostream& log);

}  // namespace sjd::engine
