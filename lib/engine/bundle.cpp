#include "engine/bundle.h"

#include <fstream>

#include "text/tokenizer.h"

namespace sjd::engine {
namespace {

std::vector<std::filesystem::path> file_list(const nlohmann::json& section, const std::filesystem::path& dir,
                                             const std::string& where) {
  if (!section.contains("weights")) throw InputError(where + ".weights: missing");
  const nlohmann::json& w = section["weights"];
  std::vector<std::filesystem::path> files;
  if (w.is_string()) {
    files.push_back(dir / w.get<std::string>());
  } else if (w.is_array() && !w.empty()) {
    for (const auto& f : w) {
      if (!f.is_string()) throw InputError(where + ".weights: expected file names");
      files.push_back(dir / f.get<std::string>());
    }
  } else {
    throw InputError(where + ".weights: expected a file name or a list of them");
  }
  for (const auto& f : files) {
    if (!std::filesystem::exists(f)) throw InputError(where + ".weights: file not found: " + f.string());
  }
  return files;
}

const nlohmann::json& section(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_object()) throw InputError(where + ": missing object \"" + key + "\"");
  return j[key];
}

}  // namespace

Bundle load_bundle(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) throw InputError("model directory not found: " + dir.string());
  Bundle b;
  b.dir = dir;
  b.json_path = dir / "bundle.json";
  std::ifstream in(b.json_path);
  if (!in) throw InputError(b.json_path.string() + ": cannot open (is this a model bundle?)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(b.json_path.string() + ": invalid JSON: " + e.what());
  }
  const std::string where = b.json_path.string();
  if (j.value("format", std::string()) != "sjd-bundle") throw InputError(where + ": \"format\" must be \"sjd-bundle\"");
  if (j.value("version", 0) != 1) throw InputError(where + ": unsupported \"version\" (expected 1)");
  b.name = j.value("name", dir.filename().string());
  b.family = j.value("family", std::string());
  if (b.family.empty()) throw InputError(where + ": missing \"family\"");
  try {
    const nlohmann::json& t = section(j, "transformer", where);
    b.transformer = model::parse_transformer_config(t, where + ": transformer");
    b.transformer_weights = file_list(t, dir, where + ": transformer");
    b.layout = section(j, "layout", where);
    b.tokenizer = section(j, "tokenizer", where);
    if (b.tokenizer.contains("file")) {
      const auto file = dir / b.tokenizer["file"].get<std::string>();
      if (!std::filesystem::exists(file)) throw InputError(where + ": tokenizer.file not found: " + file.string());
      b.tokenizer["file"] = file.string();
    }
    const nlohmann::json& v = section(j, "vq", where);
    b.vq = vq::parse_vq_config(v, where + ": vq");
    b.vq_weights = file_list(v, dir, where + ": vq");
    b.defaults = j.value("defaults", nlohmann::json::object());
    b.raw = j;
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(e.what());
  }
  return b;
}

std::unique_ptr<text::Tokenizer> load_bundle_tokenizer(const Bundle& b) {
  nlohmann::json options = b.tokenizer;
  const std::string kind = options.value("kind", std::string());
  const std::string file = options.value("file", std::string());
  options.erase("kind");
  options.erase("file");
  return text::load_tokenizer(kind, file, options);
}

family::FamilyContext family_context(const Bundle& b, const text::Tokenizer& tokenizer, const io::WeightMap* weights,
                                     int64_t resolution) {
  family::FamilyContext c;
  c.family = b.family;
  c.bundle = b.raw;
  c.bundle_dir = b.dir;
  c.where = b.json_path.string();
  c.tokenizer = &tokenizer;
  c.weights = weights;
  c.vocab_size = b.transformer.vocab_size;
  c.downsample = b.vq.downsample;
  c.resolution = resolution;
  return c;
}

}  // namespace sjd::engine
