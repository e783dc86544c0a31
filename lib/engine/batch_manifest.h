#pragma once
// A batch folder's manifest.jsonl: one JSON record per line, appended as images
// finish or fail. Every field read back is validated (a hand-edited or damaged
// line is skipped with a warning, never trusted as an index), and an image counts
// as done only while its PNG is intact (structure, CRC and the size and checksum
// the manifest recorded), so a truncated file is made again.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>

namespace sjd::engine {

// A manifest line that records a finished image whose file is still intact.
struct FinishedImage {
  int line = 0;
  nlohmann::json record;
};

// Reads the manifest as it grows: each call of read_new() parses only the lines
// appended since the last call (another process may be appending too).
class ManifestReader {
 public:
  ManifestReader(std::filesystem::path manifest, std::filesystem::path dir, std::ostream& log);
  // New finished images by index (a later line for an index replaces an earlier one).
  std::map<int64_t, FinishedImage> read_new();

 private:
  std::filesystem::path manifest_;
  std::filesystem::path dir_;
  std::ostream& log_;
  uint64_t offset_ = 0;  // bytes of whole lines read so far
  int lines_ = 0;
};

// The size and CRC-32 of a written image, recorded in its manifest line.
void record_file_checksum(nlohmann::json& record, const std::filesystem::path& file);

// The picture's identity: its prompt, the model and every setting but the device
// (a resumed run may move to another machine).
nlohmann::json image_identity(const std::string& prompt, const std::string& model, nlohmann::json settings);

// Throws InputError when a finished image was made with another identity,
// naming the manifest line and the first difference ("cfg 2.0 (now 1.5)").
void check_same_run(const FinishedImage& done, const nlohmann::json& expected, const std::filesystem::path& manifest);

}  // namespace sjd::engine
