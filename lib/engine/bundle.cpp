#include "engine/bundle.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "family/image_family.h"
#include "io/atomic_file.h"
#include "io/input_files.h"
#include "text/tokenizer.h"
#include "text/json_error.h"
#include "text/strict_json.h"

namespace sjd::engine {
namespace {

std::filesystem::path bundle_file(const std::filesystem::path& dir, const nlohmann::json& name,
                                  const std::string& where) {
  if (!name.is_string()) throw InputError(where + ": expected a file name, found " + name.dump());
  const std::filesystem::path file = io::confined_path(dir, name.get<std::string>(), where);
  io::require_regular_file(file, where);
  return file;
}

std::vector<std::filesystem::path> file_list(const nlohmann::json& section, const std::filesystem::path& dir,
                                             const std::string& where) {
  if (!section.contains("weights")) throw InputError(where + ".weights: missing");
  const nlohmann::json& w = section["weights"];
  std::vector<std::filesystem::path> files;
  if (w.is_string()) {
    files.push_back(bundle_file(dir, w, where + ".weights"));
  } else if (w.is_array() && !w.empty()) {
    for (const auto& f : w) files.push_back(bundle_file(dir, f, where + ".weights"));
  } else {
    throw InputError(where + ".weights: expected a file name or a list of them");
  }
  return files;
}

const nlohmann::json& section(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_object()) throw InputError(where + ": missing object \"" + key + "\"");
  return j[key];
}

// A top-level string of bundle.json; `fallback` when absent and allowed.
std::string string_field(const nlohmann::json& j, const char* key, const std::string& where,
                         const std::string& fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) throw InputError(where + ": \"" + key + "\" must be a string, found " + j[key].dump());
  return j[key].get<std::string>();
}

bool is_folder(const std::filesystem::path& dir) {
  std::error_code error;  // a symlink loop is "not a directory", not a filesystem exception
  return std::filesystem::is_directory(dir, error);
}

}  // namespace

nlohmann::json read_json_input(const std::filesystem::path& file, const std::string& what) {
  // Parsed JSON takes several times its text's bytes; no settings file, bundle, profile or request
  // comes near this.
  constexpr uint64_t kMaxBytes = 16 << 20;
  io::require_file_at_most(file, what, kMaxBytes);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string() + ": cannot open the " + what);
  try {
    return text::parse_strict_json(in, file.string());
  } catch (const text::StrictJsonError& e) {
    throw InputError(e.what());
  }
}

Bundle load_bundle(const std::filesystem::path& dir) {
  if (!is_folder(dir)) {
    std::error_code error;
    if (std::filesystem::is_regular_file(dir, error)) {
      throw InputError("--model " + dir.string() + ": a file, not a model directory (give the folder that holds it: " +
                       (dir.has_parent_path() ? dir.parent_path().string() : std::string(".")) + ")");
    }
    throw InputError("model directory not found: " + dir.string());
  }
  Bundle b;
  b.dir = dir;
  b.json_path = dir / "bundle.json";
  const nlohmann::json j = read_json_input(b.json_path, "bundle.json (is this a model bundle?)");
  const std::string where = b.json_path.string();
  if (!j.is_object()) throw InputError(where + ": expected a JSON object, found " + std::string(j.type_name()));
  if (string_field(j, "format", where, "") != "sjd-bundle")
    throw InputError(where + ": \"format\" must be \"sjd-bundle\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1) {
    throw InputError(where + ": unsupported \"version\" " +
                     (j.contains("version") ? j["version"].dump() : "(missing)") + " (expected 1)");
  }
  b.name = string_field(j, "name", where, dir.filename().string());
  b.family = string_field(j, "family", where, "");
  if (b.family.empty()) throw InputError(where + ": missing \"family\"");
  try {
    const nlohmann::json& t = section(j, "transformer", where);
    b.transformer = model::parse_transformer_config(t, where + ": transformer");
    b.transformer_weights = file_list(t, dir, where + ": transformer");
    b.layout = section(j, "layout", where);
    b.tokenizer = section(j, "tokenizer", where);
    // Both are read before the model loads (a number for kind was an exception from the JSON library, a
    // missing file an empty path).
    if (!b.tokenizer.contains("kind") || !b.tokenizer["kind"].is_string()) {
      throw InputError(where + ": tokenizer.kind: expected the tokenizer's kind as a string (" +
                       text::known_tokenizer_kinds() + ")");
    }
    const auto& kinds = text::tokenizer_kinds();
    if (std::find(kinds.begin(), kinds.end(), b.tokenizer["kind"].get<std::string>()) == kinds.end()) {
      throw InputError(where + ": tokenizer.kind: unknown kind " + b.tokenizer["kind"].dump() + " (" +
                       text::known_tokenizer_kinds() + ")");
    }
    if (!b.tokenizer.contains("file") && b.tokenizer["kind"] != "byte") {
      throw InputError(where + ": tokenizer.file: missing (the tokenizer file, relative to the bundle)");
    }
    if (b.tokenizer.contains("file")) {
      b.tokenizer["file"] = bundle_file(dir, b.tokenizer["file"], where + ": tokenizer.file").string();
    }
    const nlohmann::json& v = section(j, "vq", where);
    b.vq = vq::parse_vq_config(v, where + ": vq");
    b.vq_weights = file_list(v, dir, where + ": vq");
    if (j.contains("defaults") && !j["defaults"].is_object()) {
      throw InputError(where + ": \"defaults\" must be an object of settings");
    }
    b.defaults = j.value("defaults", nlohmann::json::object());
    b.raw = j;
  } catch (const InputError&) {
    throw;
  } catch (const io::FileError&) {
    throw;
  } catch (const nlohmann::json::exception& e) {  // a value of the wrong type deep in a section
    throw InputError(where + ": " + text::json_error_message(e));
  } catch (const std::exception& e) {
    throw InputError(e.what());
  }
  return b;
}

void check_ids_in_vocabulary(const std::vector<int64_t>& ids, const Bundle& bundle) {
  for (const int64_t id : ids) {
    if (id < 0 || id >= bundle.transformer.vocab_size) {
      throw InputError(bundle.json_path.string() + ": the tokenizer gave id " + std::to_string(id) +
                       ", outside the model's vocabulary of " + std::to_string(bundle.transformer.vocab_size) +
                       " (transformer.vocab_size)");
    }
  }
}

std::unique_ptr<text::Tokenizer> load_bundle_tokenizer(const Bundle& b) {
  nlohmann::json options = b.tokenizer;
  const std::string kind = options.value("kind", std::string());
  const std::string file = options.value("file", std::string());
  options.erase("kind");
  options.erase("file");
  return text::load_tokenizer(kind, file, options, b.json_path.string() + ": tokenizer");
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
  c.trust_code = b.trust_code;
  return c;
}

std::unique_ptr<family::ImageFamily> make_bundle_family(const Bundle& bundle, const text::Tokenizer& tokenizer,
                                                        const io::WeightMap* weights, int64_t resolution) {
  try {
    return family::make_family(family_context(bundle, tokenizer, weights, resolution));
  } catch (const nlohmann::json::exception& e) {  // a layout value of the wrong type
    throw InputError(bundle.json_path.string() + ": layout: " + text::json_error_message(e));
  }
}

void check_resolution_supported(const Bundle& bundle, const text::Tokenizer& tokenizer, int64_t resolution,
                                const std::string& asked_by) {
  if (resolution == 0) return;
  try {
    make_bundle_family(bundle, tokenizer, nullptr, resolution);
  } catch (const std::invalid_argument& e) {
    throw InputError(asked_by + " " + std::to_string(resolution) + ": " + e.what());
  }
}

}  // namespace sjd::engine
