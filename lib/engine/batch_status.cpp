#include "engine/batch_status.h"

#include <fstream>
#include <iomanip>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/batch_manifest.h"
#include "engine/bundle.h"
#include "io/atomic_file.h"
#include "io/input_files.h"

namespace sjd::engine {
namespace {

constexpr const char* kSizeFile = "batch.json";

void count_image(ShardStatus& row, bool done, bool failed) {
  if (done) {
    ++row.done;
  } else if (failed) {
    ++row.failed;
  } else {
    ++row.missing;
  }
}

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
    io::require_regular_file(file, "batch record");  // a FIFO would block the read
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
  if (!j.is_object() || !j.contains("images") || !j["images"].is_number_unsigned()) {
    throw InputError(file.string() + ": \"images\" is not a non-negative integer; pass --prompts FILE");
  }
  return j["images"].get<int64_t>();
}

BatchStatus batch_status(const std::filesystem::path& dir, int64_t images, std::ostream& log) {
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
  for (int64_t count : layouts) {
    for (int64_t index = 0; index < count; ++index) status.shards.push_back({{index, count}});
  }
  // Each layout's rows are contiguous, so shard I of layout N is row offset[N] + I.
  std::map<int64_t, size_t> first_row;
  for (size_t row = 0; row < status.shards.size(); ++row) first_row.emplace(status.shards[row].shard.count, row);
  for (int64_t i = 0; i < images; ++i) {
    const bool is_done = done.count(i) > 0;
    const bool is_failed = !is_done && failures.count(i) > 0;
    count_image(status.overall, is_done, is_failed);
    for (const auto& [count, row] : first_row) count_image(status.shards[row + i % count], is_done, is_failed);
    if (is_failed) status.failed.push_back(i);
    if (!is_done && !is_failed) status.missing.push_back(i);
  }
  return status;
}

void print_batch_status(const BatchStatus& status, std::ostream& out) {
  const auto row = [&](const std::string& name, const ShardStatus& s) {
    out << std::left << std::setw(12) << name << std::right << std::setw(8) << s.done << std::setw(8) << s.failed
        << std::setw(9) << s.missing << "\n";
  };
  out << std::left << std::setw(12) << "shard" << std::right << std::setw(8) << "done" << std::setw(8) << "failed"
      << std::setw(9) << "missing" << "\n";
  for (const ShardStatus& s : status.shards) row(s.shard.describe(), s);
  row("all", status.overall);
  out << "images: " << status.images << (status.complete() ? ", complete" : "") << "\n";
  if (!status.failed.empty()) out << "failed: " << index_ranges(status.failed) << "\n";
  if (!status.missing.empty()) out << "missing: " << index_ranges(status.missing) << "\n";
}

std::string index_ranges(const std::vector<int64_t>& indices) {
  std::string text;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!text.empty()) text += ", ";
    text += std::to_string(indices[i]);
    if (j > i) text += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  return text;
}

MergeResult merge_manifests(const std::filesystem::path& dir, std::ostream& log) {
  if (!std::filesystem::is_directory(dir)) throw InputError(dir.string() + ": not a folder");
  const std::filesystem::path merged = dir / manifest_name(Shard{});
  // Locked in one order (the merged file, then by name), so two merges cannot deadlock.
  std::vector<std::unique_ptr<io::AppendLock>> locks;
  locks.push_back(std::make_unique<io::AppendLock>(merged));
  std::vector<std::filesystem::path> shard_manifests;
  for (const std::filesystem::path& manifest : list_manifests(dir)) {
    if (manifest == merged) continue;
    locks.push_back(std::make_unique<io::AppendLock>(manifest));
    shard_manifests.push_back(manifest);
  }
  ManifestReader reader(dir, log);
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
  io::write_file_atomic(merged, text);
  for (const std::filesystem::path& manifest : shard_manifests) {
    std::error_code error;
    if (std::filesystem::remove(manifest, error)) ++result.shard_manifests_removed;
  }
  return result;
}

}  // namespace sjd::engine
