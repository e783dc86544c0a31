#include "engine/batch_status.h"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/batch_manifest.h"
#include "engine/bundle.h"
#include "io/atomic_file.h"
#include "io/input_files.h"
#include "io/prompt_file.h"

namespace sjd::engine {
namespace {

constexpr const char* kSizeFile = "batch.json";

}  // namespace

void record_batch_size(const std::filesystem::path& dir, const std::filesystem::path& prompts, int64_t images) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(prompts, error);
  const nlohmann::json description = {{"prompts", (error ? prompts : absolute).string()}, {"images", images}};
  io::write_file_atomic(dir / kSizeFile, description.dump(2) + "\n");
}

int64_t recorded_batch_size(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kSizeFile;
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::symlink_status(file, error))) {
    io::require_file_at_most(file, "batch record", 1 << 20);  // a FIFO would block the read
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw InputError(file.string() + ": not found (sjd batch writes it when it starts); is " + dir.string() +
                     " a batch folder? Otherwise pass --prompts FILE");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw InputError(file.string() + ": not valid JSON; pass --prompts FILE");
  }
  // A prompt takes at least a byte of its file, so no run has more images than its prompt file has bytes.
  if (!j.is_object() || !j.contains("images") || !j["images"].is_number_unsigned() ||
      j["images"].get<uint64_t>() > io::kMaxPromptFileBytes) {
    throw InputError(file.string() + ": \"images\" is not an integer from 0 to " +
                     std::to_string(io::kMaxPromptFileBytes) + " (no prompt file holds more); pass --prompts FILE");
  }
  return j["images"].get<int64_t>();
}

BatchStatus batch_status(const std::filesystem::path& dir, int64_t images, std::ostream& log,
                         const std::vector<std::string>* prompts) {
  ManifestReader reader(dir, log);
  const std::map<int64_t, FinishedImage> done = reader.read_new();
  const std::map<int64_t, FinishedImage>& failures = reader.failures();
  BatchStatus status;
  status.images = images;
  std::set<int64_t> layouts;  // the shard counts N of the folder's manifests
  for (const std::filesystem::path& manifest : list_manifests(dir)) {
    const Shard shard = *shard_of_manifest(manifest.filename().string());
    if (shard.count > 1) layouts.insert(shard.count);
  }
  // Every image starts missing; the finished ones then move to done or failed.
  status.overall.missing = images;
  for (int64_t count : layouts) {
    for (int64_t index = 0; index < count; ++index) {
      ShardStatus row{{index, count}};
      row.missing = row.shard.owned_in(0, images);
      status.shards.push_back(row);
    }
  }
  // Each layout's rows are contiguous, so shard I of layout N is row first_row[N] + I.
  std::map<int64_t, size_t> first_row;
  for (size_t row = 0; row < status.shards.size(); ++row) first_row.emplace(status.shards[row].shard.count, row);
  const auto move_out_of_missing = [&](int64_t i, int64_t ShardStatus::*to) {
    --status.overall.missing;
    ++(status.overall.*to);
    for (const auto& [count, row] : first_row) {
      ShardStatus& shard = status.shards[row + i % count];
      --shard.missing;
      ++(shard.*to);
    }
  };
  // index -> (done, its line); a done image wins over an earlier failure.
  std::map<int64_t, std::pair<bool, const nlohmann::json*>> finished;
  for (const auto& [i, image] : done) finished.emplace(i, std::pair{true, &image.record});
  for (const auto& [i, image] : failures) finished.emplace(i, std::pair{false, &image.record});
  std::vector<int64_t> failed;
  int64_t next = 0;  // the first index not yet placed in a range
  for (const auto& [i, outcome] : finished) {
    const auto& [is_done, record] = outcome;
    if (i < 0 || i >= images) {
      ++status.past_end;
      continue;
    }
    if (prompts != nullptr && !records_prompt(*record, (*prompts)[static_cast<size_t>(i)])) {
      (is_done ? status.other_prompt_done : status.other_prompt_failed).push_back(i);
      continue;
    }
    move_out_of_missing(i, is_done ? &ShardStatus::done : &ShardStatus::failed);
    if (!is_done) failed.push_back(i);
    if (i > next) status.missing.push_back({next, i - 1});
    next = i + 1;
  }
  if (next < images) status.missing.push_back({next, images - 1});
  status.failed = ranges_of(failed);
  return status;
}

void print_batch_status(const BatchStatus& status, std::ostream& out) {
  // Columns as wide as the largest count or shard name needs, with a space to spare (a count of 8 digits ran
  // into its neighbour).
  const int count = std::max<int>(8, static_cast<int>(std::to_string(status.images).size()) + 1);
  size_t name = 11;
  for (const ShardStatus& s : status.shards) name = std::max(name, s.shard.describe().size());
  const int name_width = static_cast<int>(name) + 1;
  const auto row = [&](const std::string& label, const ShardStatus& s) {
    out << std::left << std::setw(name_width) << label << std::right << std::setw(count) << s.done
        << std::setw(count) << s.failed << std::setw(count + 1) << s.missing << "\n";
  };
  out << std::left << std::setw(name_width) << "shard" << std::right << std::setw(count) << "done"
      << std::setw(count) << "failed" << std::setw(count + 1) << "missing" << "\n";
  for (const ShardStatus& s : status.shards) row(s.shard.describe(), s);
  row("all", status.overall);
  out << "images: " << status.images << (status.complete() ? ", complete" : "") << "\n";
  if (!status.failed.empty()) out << "failed: " << index_ranges(status.failed) << "\n";
  if (!status.missing.empty()) out << "missing: " << index_ranges(status.missing) << "\n";
  if (!status.other_prompt_done.empty()) {
    out << "made from other prompts than the prompt file's (counted missing; sjd batch with that file refuses this "
           "folder): "
        << index_ranges(ranges_of(status.other_prompt_done)) << "\n";
  }
  if (!status.other_prompt_failed.empty()) {
    out << "failed with other prompts than the prompt file's (counted missing; sjd batch with that file makes them): "
        << index_ranges(ranges_of(status.other_prompt_failed)) << "\n";
  }
  if (status.past_end > 0) {
    out << "past the end: " << status.past_end << " image(s) recorded from index " << status.images
        << " on, past the prompts counted\n";
  }
}

std::vector<IndexRange> ranges_of(const std::vector<int64_t>& sorted_indices) {
  std::vector<IndexRange> ranges;
  for (int64_t i : sorted_indices) {
    if (!ranges.empty() && ranges.back().last + 1 == i) {
      ranges.back().last = i;
    } else {
      ranges.push_back({i, i});
    }
  }
  return ranges;
}

std::string index_ranges(const std::vector<IndexRange>& ranges) {
  std::string text;
  for (const IndexRange& range : ranges) {
    if (!text.empty()) text += ", ";
    text += std::to_string(range.first);
    if (range.last > range.first) text += "-" + std::to_string(range.last);
  }
  return text;
}

MergeResult merge_manifests(const std::filesystem::path& dir, std::ostream& log) {
  if (!std::filesystem::is_directory(dir)) throw InputError(dir.string() + ": not a folder");
  const std::filesystem::path merged = dir / manifest_name(Shard{});
  // Locked in one order (the merged file, then by name), so two merges cannot deadlock.
  std::vector<std::unique_ptr<io::AppendLock>> locks;
  std::error_code error;
  const bool merged_existed = std::filesystem::exists(std::filesystem::symlink_status(merged, error));
  locks.push_back(std::make_unique<io::AppendLock>(merged));  // creates it when absent
  std::vector<std::filesystem::path> shard_manifests;
  try {
    for (const std::filesystem::path& manifest : list_manifests(dir)) {
      if (manifest == merged) continue;
      locks.push_back(std::make_unique<io::AppendLock>(manifest));
      shard_manifests.push_back(manifest);
    }
  } catch (const std::exception&) {  // a manifest that cannot be locked (a link): no empty merged file is left
    if (!merged_existed && std::filesystem::file_size(merged, error) == 0 && !error) {
      std::filesystem::remove(merged, error);
    }
    throw;
  }
  ManifestReader reader(dir, log);
  reader.read_locked_files();
  std::map<int64_t, nlohmann::json> records;
  MergeResult result;
  for (auto& [index, image] : reader.read_new()) {
    records[index] = std::move(image.record);
    ++result.done;
  }
  for (const auto& [index, image] : reader.failures()) {
    if (records.emplace(index, image.record).second) ++result.failed;
  }
  std::string text;
  for (const auto& [index, record] : records) text += record.dump() + "\n";
  // Lines no reader trusts go on, after the records, rather than vanish with the shard manifests: every
  // reader skips them with a warning, as it did before the merge.
  for (const std::string& line : reader.ignored_lines()) text += line + "\n";
  result.ignored_lines = static_cast<int64_t>(reader.ignored_lines().size());
  io::write_file_atomic(merged, text);
  for (const std::filesystem::path& manifest : shard_manifests) {
    std::error_code error;
    if (std::filesystem::remove(manifest, error)) ++result.shard_manifests_removed;
  }
  return result;
}

}  // namespace sjd::engine
