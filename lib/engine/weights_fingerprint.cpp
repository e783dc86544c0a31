#include "engine/weights_fingerprint.h"

#include <cstdint>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "io/sharded_index.h"

namespace sjd::engine {
namespace {

constexpr uint64_t kHeadBytes = 64 * 1024;
constexpr uint64_t kBlockBytes = 4 * 1024;
constexpr uint64_t kBlocks = 64;

// FNV-1a, 64 bits: not a cryptographic hash (nobody forges a bundle against a resume check), but every byte
// moves it.
class Fnv1a64 {
 public:
  void add(const char* bytes, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash_ ^= static_cast<unsigned char>(bytes[i]);
      hash_ *= 0x100000001b3ULL;
    }
  }
  void add(const std::string& text) { add(text.data(), text.size() + 1); }  // with its NUL: "ab"+"c" != "a"+"bc"
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

void add_file(Fnv1a64& hash, const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(file, error);
  if (!in || error) throw InputError(file.string() + ": cannot read the file for the model's fingerprint");
  hash.add(file.filename().string());  // the name, not the path: a bundle moved or copied is the same model
  hash.add(std::to_string(size));
  std::vector<char> buffer;
  const auto read_at = [&](uint64_t offset, uint64_t bytes) {
    buffer.resize(static_cast<size_t>(bytes));
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buffer.data(), static_cast<std::streamsize>(bytes));
    if (in.gcount() != static_cast<std::streamsize>(bytes)) {
      throw InputError(file.string() + ": the file ended early while sjd read it for the model's fingerprint");
    }
    hash.add(buffer.data(), static_cast<size_t>(bytes));
  };
  if (size <= kHeadBytes + kBlocks * kBlockBytes) {  // no larger than the samples: all of it
    read_at(0, size);
    return;
  }
  read_at(0, kHeadBytes);
  // Blocks from just past the head to the file's last 4 KiB, evenly spaced.
  const uint64_t span = size - kHeadBytes - kBlockBytes;
  for (uint64_t k = 0; k < kBlocks; ++k) read_at(kHeadBytes + span * k / (kBlocks - 1), kBlockBytes);
}

}  // namespace

std::string weights_fingerprint(const Bundle& bundle) {
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::path& file : bundle.transformer_weights) {
    files.push_back(file);
    // A sharded checkpoint's index names its shards, which hold the weights.
    const std::string name = file.filename().string();
    const std::string index_suffix = ".index.json";
    if (name.size() > index_suffix.size() && name.compare(name.size() - index_suffix.size(), index_suffix.size(),
                                                          index_suffix) == 0) {
      try {
        for (const std::filesystem::path& shard : io::sharded_files(file)) files.push_back(shard);
      } catch (const io::WeightError& e) {
        throw InputError(e.what());
      }
    }
  }
  files.insert(files.end(), bundle.vq_weights.begin(), bundle.vq_weights.end());
  if (bundle.tokenizer.is_object() && bundle.tokenizer.contains("file") && bundle.tokenizer["file"].is_string()) {
    files.emplace_back(bundle.tokenizer["file"].get<std::string>());
  }
  Fnv1a64 hash;
  for (const std::filesystem::path& file : files) add_file(hash, file);
  std::ostringstream out;
  out << "sampled-fnv1a64:" << std::hex << std::setw(16) << std::setfill('0') << hash.value();
  return out.str();
}

}  // namespace sjd::engine
