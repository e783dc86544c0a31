#include "engine/weights_fingerprint.h"

#include <cstdint>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "io/input_files.h"
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
  if (!in || error) {
    throw InputError(file.string() + ": cannot read the file for the model's fingerprint" +
                     (error ? ": " + error.message() : std::string()));
  }
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

// `listed` in order, each sharded checkpoint's index followed by its shards (which hold the weights).
void add_weight_files(std::vector<std::filesystem::path>& files, const std::vector<std::filesystem::path>& listed) {
  const std::string index_suffix = ".index.json";
  for (const std::filesystem::path& file : listed) {
    files.push_back(file);
    const std::string name = file.filename().string();
    if (name.size() <= index_suffix.size() ||
        name.compare(name.size() - index_suffix.size(), index_suffix.size(), index_suffix) != 0) {
      continue;
    }
    try {
      for (const std::filesystem::path& shard : io::sharded_files(file)) files.push_back(shard);
    } catch (const io::WeightError& e) {
      throw InputError(e.what());
    }
  }
}

// LlamaGen's T5 caption encoder ("text_encoder": its weights make the caption embeddings); none elsewhere.
std::vector<std::filesystem::path> text_encoder_files(const Bundle& bundle) {
  std::vector<std::filesystem::path> files;
  if (!bundle.raw.is_object() || !bundle.raw.contains("text_encoder")) return files;
  const nlohmann::json& section = bundle.raw["text_encoder"];
  if (!section.is_object() || !section.contains("weights")) return files;
  const nlohmann::json& weights = section["weights"];
  const std::string where = bundle.json_path.string() + ": text_encoder.weights";
  for (const nlohmann::json& name : weights.is_array() ? weights : nlohmann::json::array({weights})) {
    if (!name.is_string()) continue;  // the family refused such a bundle when the model was built
    try {
      files.push_back(io::confined_path(bundle.dir, name.get<std::string>(), where));
    } catch (const std::runtime_error& e) {
      throw InputError(e.what());
    }
  }
  return files;
}

}  // namespace

std::string weights_fingerprint(const Bundle& bundle) {
  std::vector<std::filesystem::path> files;
  add_weight_files(files, bundle.transformer_weights);
  add_weight_files(files, bundle.vq_weights);
  if (bundle.tokenizer.is_object() && bundle.tokenizer.contains("file") && bundle.tokenizer["file"].is_string()) {
    files.emplace_back(bundle.tokenizer["file"].get<std::string>());
  }
  add_weight_files(files, text_encoder_files(bundle));
  Fnv1a64 hash;
  for (const std::filesystem::path& file : files) add_file(hash, file);
  std::ostringstream out;
  out << "sampled-fnv1a64:" << std::hex << std::setw(16) << std::setfill('0') << hash.value();
  return out.str();
}

}  // namespace sjd::engine
