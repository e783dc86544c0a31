#include "engine/batch_manifest.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/batch_shards.h"
#include "engine/bundle.h"
#include "io/png_chunks.h"
#include "io/prompt_file.h"
#include "text/utf8.h"

namespace sjd::engine {
namespace {

std::string read_whole(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A batch image's file name: a plain name in the folder, never a path.
bool is_plain_png_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name.size() > 4 && name.compare(name.size() - 4, 4, ".png") == 0;
}

// What is wrong with a manifest record, or "" when its fields can be trusted.
std::string record_problem(const nlohmann::json& j) {
  if (!j.is_object()) return "not a JSON object";
  const auto index = j.find("index");
  // Bounded far above any run's count, so that the next free index (compare's, one past the largest)
  // cannot overflow: 2^63 - 1 there once gave a negative index on every resume.
  constexpr int64_t kMaxIndex = int64_t{1} << 48;
  if (index == j.end() || !index->is_number_integer() || index->get<int64_t>() < 0 ||
      index->get<int64_t>() > kMaxIndex) {
    return "\"index\" is not an integer from 0 to 2^48";
  }
  const auto status = j.find("status");
  if (status == j.end() || !status->is_string()) return "\"status\" is not a string";
  if (*status != "ok") return {};
  const auto file = j.find("file");
  if (file == j.end() || !file->is_string() || !is_plain_png_name(file->get<std::string>())) {
    return "\"file\" is not a PNG name in the folder";
  }
  for (const char* key : {"prompt", "model", "weights"}) {
    if (j.contains(key) && !j[key].is_string()) return std::string("\"") + key + "\" is not a string";
  }
  if (j.contains("settings") && !j["settings"].is_object()) return "\"settings\" is not an object";
  if (j.contains("planning") && !j["planning"].is_object()) return "\"planning\" is not an object";
  if (j.contains("file_bytes") && !j["file_bytes"].is_number_unsigned()) return "\"file_bytes\" is not a size";
  if (j.contains("file_crc32") && !j["file_crc32"].is_number_unsigned()) return "\"file_crc32\" is not a number";
  return {};
}

// The image is a whole PNG (every chunk's CRC, IEND at the end) and matches the
// size and checksum its line recorded (older manifests recorded none).
bool image_intact(const std::filesystem::path& file, const nlohmann::json& record) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(file, error))) return false;
  const std::string bytes = read_whole(file);
  if (record.contains("file_bytes") && record["file_bytes"].get<uint64_t>() != bytes.size()) return false;
  if (record.contains("file_crc32") && record["file_crc32"].get<uint64_t>() != io::png_crc32(bytes)) return false;
  try {
    io::parse_png_chunks(bytes, file);
  } catch (const io::PngError&) {
    return false;
  }
  return true;
}

}  // namespace

ManifestReader::ManifestReader(std::filesystem::path dir, std::ostream& log) : dir_(std::move(dir)), log_(log) {}

std::map<int64_t, FinishedImage> ManifestReader::read_new() {
  std::map<int64_t, FinishedImage> done;
  for (const std::filesystem::path& manifest : list_manifests(dir_)) read_new_lines(manifest, read_[manifest], done);
  return done;
}

void ManifestReader::read_new_lines(const std::filesystem::path& manifest, Progress& progress,
                                    std::map<int64_t, FinishedImage>& done) {
  struct stat info {};
  if (::lstat(manifest.c_str(), &info) != 0) return;
  // Records are appended to the file itself (never through a link), and a FIFO would block the read.
  if (!S_ISREG(info.st_mode)) {
    throw InputError(manifest.string() + ": not a regular file (" +
                     (S_ISLNK(info.st_mode) ? "a symbolic link"
                                            : S_ISDIR(info.st_mode) ? "a folder" : "a special file") +
                     "); a manifest is a plain file that sjd writes");
  }
  if (info.st_ino != progress.inode) progress = {0, 0, info.st_ino};  // new, or replaced by `sjd manifest --merge`
  std::ifstream in(manifest, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(progress.offset));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof() && !locked_) break;  // a line still being written has no newline yet: read it next time
    progress.offset += line.size() + 1;
    const int number = ++progress.lines;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      log_ << "warning: " << manifest.string() << ":" << number << ": unreadable line ignored\n";
      if (locked_) ignored_lines_.push_back(line);
      continue;
    }
    const std::string problem = record_problem(j);
    if (!problem.empty()) {
      log_ << "warning: " << manifest.string() << ":" << number << ": " << problem << "; line ignored\n";
      if (locked_) ignored_lines_.push_back(line);
      continue;
    }
    const auto index = j["index"].get<int64_t>();
    if (j["status"] != "ok") {
      failures_[index] = {manifest, number, std::move(j)};
      continue;
    }
    const std::filesystem::path file = dir_ / j["file"].get<std::string>();
    if (!image_intact(file, j)) {
      log_ << "warning: " << manifest.string() << ":" << number << ": " << file.string()
           << " is missing or damaged; it will be made again\n";
      damaged_[index] = {manifest, number, std::move(j)};
      continue;
    }
    damaged_.erase(index);
    done[index] = {manifest, number, std::move(j)};
  }
}

void record_file_checksum(nlohmann::json& record, const std::filesystem::path& file) {
  const std::string bytes = read_whole(file);
  record["file_bytes"] = static_cast<uint64_t>(bytes.size());
  record["file_crc32"] = static_cast<uint64_t>(io::png_crc32(bytes));
}

void record_prompt(nlohmann::json& record, const std::string& prompt) {
  constexpr size_t kCutPromptBytes = 1024;
  if (prompt.size() <= io::kMaxPromptBytes) {
    record["prompt"] = text::utf8::to_valid(prompt);
    return;
  }
  record["prompt"] = text::utf8::to_valid(text::utf8::whole_prefix(prompt, kCutPromptBytes));
  record["prompt_bytes"] = static_cast<uint64_t>(prompt.size());
}

bool records_prompt(const nlohmann::json& record, const std::string& prompt) {
  const auto recorded = record.find("prompt");
  if (recorded == record.end() || !recorded->is_string()) return true;
  nlohmann::json expected = nlohmann::json::object();
  record_prompt(expected, prompt);
  return *recorded == expected["prompt"] && record.value("prompt_bytes", nlohmann::json()) ==
                                                expected.value("prompt_bytes", nlohmann::json());
}

void record_model(nlohmann::json& record, const ModelIdentity& model) {
  record["model"] = model.name;
  if (!model.weights.empty()) record["weights"] = model.weights;
}

nlohmann::json image_identity(const std::string& prompt, const ModelIdentity& model, nlohmann::json settings,
                              nlohmann::json planning) {
  nlohmann::json identity = {{"prompt", prompt}, {"settings", std::move(settings)}};
  record_model(identity, model);
  if (!planning.is_null()) identity["planning"] = std::move(planning);
  return identity;
}

namespace {

// `j[key]` when j is an object that has it, else null (a claim file may hold anything).
nlohmann::json field(const nlohmann::json& j, const std::string& key) {
  return j.is_object() && j.contains(key) ? j.at(key) : nlohmann::json();
}

// Settings an image's identity gained after sjd first wrote manifests, each with the value that does what
// sjd did before it: a negative prompt of "" is the family's own guidance row.
const std::vector<std::pair<std::string, nlohmann::json>> kSettingsAddedLater = {{"negative_prompt", ""}};

// The first key whose values differ between two objects (or null values), as "KEY OLD (now NEW)"; "" when none.
std::string differing_key(const nlohmann::json& recorded, const nlohmann::json& expected, const std::string& prefix) {
  const auto shown = [](const nlohmann::json& v) { return v.is_null() ? std::string("unset") : v.dump(); };
  if (!(recorded.is_object() || recorded.is_null()) || !(expected.is_object() || expected.is_null())) {
    return recorded == expected ? std::string() : prefix + shown(recorded) + " (now " + shown(expected) + ")";
  }
  nlohmann::json keys = nlohmann::json::object();
  if (expected.is_object()) keys.update(expected);
  if (recorded.is_object()) keys.update(recorded);  // the union of both key sets
  for (const auto& [key, unused] : keys.items()) {
    const nlohmann::json old_value = field(recorded, key), new_value = field(expected, key);
    if (old_value != new_value) return prefix + key + " " + shown(old_value) + " (now " + shown(new_value) + ")";
  }
  return {};
}

// The recorded identity as the expected one is compared with it. Its settings that the expected identity
// leaves out are dropped: they cannot change the expected run's images (engine::identity_settings), so a
// line that recorded them (the device; ar's window; any setting, from an sjd that kept them all) is not
// another run. A line or claim written before images recorded their windows' planning inputs or their weights'
// fingerprint is taken to have the expected ones, and one written before a setting existed to have been made
// with the value that meant what sjd did then (kSettingsAddedLater).
nlohmann::json comparable(nlohmann::json recorded, const nlohmann::json& expected) {
  if (!recorded.is_object()) return recorded;
  const nlohmann::json expected_settings = field(expected, "settings");
  if (recorded.contains("settings") && recorded["settings"].is_object() && expected_settings.is_object()) {
    for (const auto& [key, then] : kSettingsAddedLater) {
      if (!recorded["settings"].contains(key)) recorded["settings"][key] = then;
    }
    nlohmann::json kept = nlohmann::json::object();
    for (const auto& [key, value] : recorded["settings"].items()) {
      if (expected_settings.contains(key)) kept[key] = value;
    }
    recorded["settings"] = std::move(kept);
  }
  for (const char* added_later : {"planning", "weights"}) {
    if (!recorded.contains(added_later) && expected.contains(added_later)) {
      recorded[added_later] = expected[added_later];
    }
  }
  return recorded;
}

}  // namespace

bool same_identity(const nlohmann::json& recorded, const nlohmann::json& expected) {
  return comparable(recorded, expected) == expected;
}

std::string identity_difference(const nlohmann::json& recorded_identity, const nlohmann::json& expected) {
  const nlohmann::json recorded = comparable(recorded_identity, expected);
  if (!recorded.is_object()) return "an identity that is not a JSON object";
  const auto head = [](const nlohmann::json& j) {
    return nlohmann::json{
        {"prompt", field(j, "prompt")}, {"model", field(j, "model")}, {"weights", field(j, "weights")}};
  };
  if (std::string d = differing_key(head(recorded), head(expected), ""); !d.empty()) return d;
  if (std::string d = differing_key(field(recorded, "settings"), field(expected, "settings"), ""); !d.empty()) return d;
  // What automatic windows read: the step-cost profile (the bundle's for the device kind, or --cost-profile)
  // and the bundle's acceptance prior.
  return differing_key(field(recorded, "planning"), field(expected, "planning"), "automatic windows planned from ");
}

namespace {

// The identity a finished image's line records; lines written before the model or its weights were recorded are
// taken to be of the expected model.
nlohmann::json recorded_identity(const FinishedImage& done, const nlohmann::json& expected) {
  const ModelIdentity model{done.record.value("model", expected["model"].get<std::string>()),
                            done.record.value("weights", std::string())};
  return image_identity(done.record.value("prompt", std::string()), model,
                        done.record.value("settings", nlohmann::json::object()), field(done.record, "planning"));
}

}  // namespace

bool is_same_run(const FinishedImage& done, const nlohmann::json& expected) {
  return same_identity(recorded_identity(done, expected), expected);
}

void check_same_run(const FinishedImage& done, const nlohmann::json& expected, const std::string& keep) {
  const nlohmann::json recorded = recorded_identity(done, expected);
  if (same_identity(recorded, expected)) return;
  throw InputError(done.manifest.string() + ":" + std::to_string(done.line) + ": image " +
                   done.record.value("file", std::string()) + " was made with " +
                   identity_difference(recorded, expected) +
                   "; resume with " + keep + ", or use another --out-dir");
}

}  // namespace sjd::engine
