#include "engine/batch_shards.h"

#include <algorithm>

#include "engine/bundle.h"

namespace sjd::engine {
namespace {

// More shards than this is a typo (a job array of a million tasks is not a thing).
constexpr int64_t kMaxShards = 1000000;

// A non-negative decimal of at most 9 digits, or nullopt.
std::optional<int64_t> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(text);
}

// A scheduler variable that must be a non-negative integer when set.
std::optional<int64_t> env_number(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  if (value == nullptr) return std::nullopt;
  const auto number = parse_count(value);
  if (!number) throw InputError(std::string(name) + "='" + value + "' is not a non-negative integer");
  return number;
}

std::optional<DetectedShard> slurm_shard(const EnvLookup& env) {
  const auto id = env_number(env, "SLURM_ARRAY_TASK_ID");
  if (!id) return std::nullopt;
  const auto count = env_number(env, "SLURM_ARRAY_TASK_COUNT");
  if (!count || *count < 1) {
    throw InputError("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; pass --shard I/N");
  }
  const int64_t min = env_number(env, "SLURM_ARRAY_TASK_MIN").value_or(0);
  const int64_t step = std::max<int64_t>(env_number(env, "SLURM_ARRAY_TASK_STEP").value_or(1), 1);
  const int64_t max = env_number(env, "SLURM_ARRAY_TASK_MAX").value_or(min + (*count - 1) * step);
  const std::string ids = std::to_string(min) + ".." + std::to_string(max);
  if (*id < min || *id > max) {
    throw InputError("SLURM_ARRAY_TASK_ID=" + std::to_string(*id) + " is outside the Slurm array's task ids (" + ids +
                     "); pass --shard I/N");
  }
  // "--array=1,4,9" has 3 tasks whose ids are no shard numbers: refuse rather than guess.
  if ((*id - min) % step != 0 || (max - min) / step + 1 != *count || (*id - min) / step >= *count) {
    throw InputError("the Slurm array's task ids (" + ids + ", " +
                     std::to_string(*count) + " tasks, this one " + std::to_string(*id) +
                     ") are not evenly spaced; use --array=0-N or pass --shard I/N");
  }
  DetectedShard detected;
  detected.shard = {(*id - min) / step, *count};
  detected.source = "SLURM_ARRAY_TASK_ID=" + std::to_string(*id) + ", SLURM_ARRAY_TASK_MIN=" + std::to_string(min) +
                    ", SLURM_ARRAY_TASK_COUNT=" + std::to_string(*count);
  return detected;
}

std::optional<DetectedShard> kubernetes_shard(const EnvLookup& env, int64_t count_flag) {
  const auto index = env_number(env, "JOB_COMPLETION_INDEX");
  if (!index) return std::nullopt;
  int64_t count = count_flag;
  std::string count_source = "--shard-count";
  if (count == 0) {
    count = env_number(env, "SJD_SHARD_COUNT").value_or(0);
    count_source = "SJD_SHARD_COUNT";
  }
  if (count < 1) {
    throw InputError("JOB_COMPLETION_INDEX is set but not the number of shards: pass --shard-count N or set "
                     "SJD_SHARD_COUNT (the Job's completions)");
  }
  if (*index >= count) {
    throw InputError("JOB_COMPLETION_INDEX=" + std::to_string(*index) + " is not below " + count_source + "=" +
                     std::to_string(count));
  }
  return DetectedShard{{*index, count}, "JOB_COMPLETION_INDEX=" + std::to_string(*index) + ", " + count_source +
                                            "=" + std::to_string(count)};
}

}  // namespace

int64_t Shard::owned_in(int64_t begin, int64_t end) const {
  // Images below x that this shard owns: ceil((x - index) / count) for x > index.
  const auto below = [this](int64_t x) { return x <= index ? int64_t{0} : (x - index + count - 1) / count; };
  return end <= begin ? 0 : below(end) - below(begin);
}

std::string Shard::describe() const { return std::to_string(index) + "/" + std::to_string(count); }

Shard parse_shard(const std::string& text, const std::string& flag) {
  const size_t slash = text.find('/');
  const auto index = parse_count(text.substr(0, slash));
  const auto count = slash == std::string::npos ? std::nullopt : parse_count(text.substr(slash + 1));
  if (!index || !count || *count < 1 || *count > kMaxShards || *index >= *count) {
    throw InputError(flag + " '" + text + "': expected I/N with 0 <= I < N <= " + std::to_string(kMaxShards) +
                     " (e.g. 0/4)");
  }
  return {*index, *count};
}

std::optional<DetectedShard> shard_from_environment(const EnvLookup& env, int64_t count_flag) {
  if (auto slurm = slurm_shard(env)) return slurm;
  return kubernetes_shard(env, count_flag);
}

Shard choose_shard(const std::string& flag, int64_t count_flag, const EnvLookup& env, std::ostream& log) {
  if (count_flag < 0) throw InputError("--shard-count must be positive");
  if (!flag.empty()) {
    const Shard shard = parse_shard(flag);
    if (count_flag > 0 && count_flag != shard.count) {  // one of them is a mistake; which is not ours to guess
      throw InputError("--shard " + flag + " and --shard-count " + std::to_string(count_flag) +
                       " give different numbers of shards");
    }
    return shard;
  }
  const auto detected = shard_from_environment(env, count_flag);
  if (!detected) {
    if (count_flag > 0) {
      throw InputError("--shard-count needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); or pass --shard I/N");
    }
    return {};
  }
  log << "batch: shard " << detected->shard.describe() << " (from " << detected->source << ")\n";
  return detected->shard;
}

std::string manifest_name(const Shard& shard) {
  if (shard.count == 1) return "manifest.jsonl";
  return "manifest." + std::to_string(shard.index) + "-of-" + std::to_string(shard.count) + ".jsonl";
}

std::optional<Shard> shard_of_manifest(const std::string& file_name) {
  if (file_name == "manifest.jsonl") return Shard{};
  const std::string prefix = "manifest.", suffix = ".jsonl";
  if (file_name.size() <= prefix.size() + suffix.size() || file_name.rfind(prefix, 0) != 0 ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string middle = file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  const size_t of = middle.find("-of-");
  if (of == std::string::npos) return std::nullopt;
  const auto index = parse_count(middle.substr(0, of));
  const auto count = parse_count(middle.substr(of + 4));
  if (!index || !count || *count < 2 || *count > kMaxShards || *index >= *count) return std::nullopt;
  // Only the canonical spelling ("manifest.01-of-3.jsonl" is no shard's manifest).
  const Shard shard{*index, *count};
  if (manifest_name(shard) != file_name) return std::nullopt;
  return shard;
}

std::vector<std::filesystem::path> list_manifests(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> manifests;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (shard_of_manifest(entry.path().filename().string())) manifests.push_back(entry.path());
  }
  std::sort(manifests.begin(), manifests.end());
  return manifests;
}

}  // namespace sjd::engine
