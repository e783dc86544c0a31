#pragma once
// A batch folder's manifests (manifest.jsonl, or one per shard: batch_shards.h):
// one JSON record per line, appended as images finish or fail. Every field read
// back is validated (a hand-edited or damaged line is skipped with a warning,
// never trusted as an index), and an image counts as done only while its PNG is
// intact (structure, CRC and the size and checksum the manifest recorded), so a
// truncated file is made again.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace sjd::engine {

// A manifest line that records a finished image whose file is still intact.
// (A failed image's line is kept the same way, by ManifestReader::failures.)
struct FinishedImage {
  std::filesystem::path manifest;
  int line = 0;
  nlohmann::json record;
};

// Reads every manifest of a batch folder as they grow: each call of read_new()
// parses only the lines appended since the last call (other processes may be
// appending, and a shard's manifest may appear at any time).
class ManifestReader {
 public:
  ManifestReader(std::filesystem::path dir, std::ostream& log);
  // New finished images by index (a later line for an index replaces an earlier one).
  std::map<int64_t, FinishedImage> read_new();
  // The latest failed line of each index read so far (it may have been made since).
  const std::map<int64_t, FinishedImage>& failures() const { return failures_; }
  // The latest line of each index read so far whose image is missing or damaged (and will be made again).
  const std::map<int64_t, FinishedImage>& damaged() const { return damaged_; }
  // For `sjd manifest --merge`, which holds every manifest's lock, so no line is being written: a last line
  // without its newline is read as a whole one, and the lines ignored (unreadable, or fields that cannot be
  // trusted) are kept, verbatim, for the merge to carry over.
  void read_locked_files() { locked_ = true; }
  const std::vector<std::string>& ignored_lines() const { return ignored_lines_; }

 private:
  struct Progress {
    uint64_t offset = 0;  // bytes of whole lines read so far
    int lines = 0;
    uint64_t inode = 0;  // a manifest replaced by a merge is read again from its start
  };
  void read_new_lines(const std::filesystem::path& manifest, Progress& progress,
                      std::map<int64_t, FinishedImage>& done);

  std::filesystem::path dir_;
  std::ostream& log_;
  std::map<std::filesystem::path, Progress> read_;
  std::map<int64_t, FinishedImage> failures_;
  std::map<int64_t, FinishedImage> damaged_;
  bool locked_ = false;
  std::vector<std::string> ignored_lines_;  // kept only when locked_
};

// The size and CRC-32 of a written image, recorded in its manifest line.
void record_file_checksum(nlohmann::json& record, const std::filesystem::path& file);

// A line's "prompt": the prompt as valid UTF-8, or, for one past the 1 MiB a prompt may have (it fails, so only
// a failed line holds one), its first KiB with "prompt_bytes", its size: a 200 MB prompt line made a 200 MB line.
void record_prompt(nlohmann::json& record, const std::string& prompt);
// Whether `record` names `prompt` as record_prompt writes it (a line without a prompt, from an older sjd, does).
bool records_prompt(const nlohmann::json& record, const std::string& prompt);

// Which model makes an image: the bundle's name and the fingerprint of its weight files
// (weights_fingerprint.h; "" leaves it out), so that a bundle exported again under the same
// name with other weights is another model.
struct ModelIdentity {
  std::string name;
  std::string weights;
};

// A manifest line's "model" and "weights".
void record_model(nlohmann::json& record, const ModelIdentity& model);

// The picture's identity: its prompt, the model, the settings that make it
// (engine::identity_settings: not the device, nor what its method ignores) and,
// with automatic windows, what they read from the bundle (Generator::window_planning;
// null: left out).
nlohmann::json image_identity(const std::string& prompt, const ModelIdentity& model, nlohmann::json settings,
                              nlohmann::json planning = nullptr);

// Whether a recorded identity (a manifest line's or a claim's) is `expected`. Recorded
// settings that `expected` leaves out are not compared (they cannot change its images),
// and one written before images recorded their windows' planning inputs or their weights'
// fingerprint (an older sjd) is taken to have the expected ones.
bool same_identity(const nlohmann::json& recorded, const nlohmann::json& expected);

// The first difference between a recorded and an expected identity, e.g.
// "cfg 2.0 (now 1.5)" or "automatic windows planned from window_prior [...] (now [...])".
std::string identity_difference(const nlohmann::json& recorded, const nlohmann::json& expected);

// Whether a finished image was made with the expected identity.
bool is_same_run(const FinishedImage& done, const nlohmann::json& expected);

// Throws InputError when a finished image was made with another identity,
// naming the manifest line, the first difference and what a resume must keep.
void check_same_run(const FinishedImage& done, const nlohmann::json& expected,
                    const std::string& keep = "the same prompts, settings and bundle");

}  // namespace sjd::engine
