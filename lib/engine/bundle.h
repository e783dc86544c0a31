#pragma once
// A model bundle: bundle.json and the files it names (docs/bundles.md).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "family/image_family.h"
#include "model/transformer_config.h"
#include "text/tokenizer.h"
#include "vq/vq_decoder.h"

namespace sjd::engine {

// Bad input: a missing directory, malformed bundle.json, a missing file. The
// command line turns it into exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Bundle {
  std::filesystem::path dir;
  std::filesystem::path json_path;
  std::string name;
  std::string family;
  model::TransformerConfig transformer;
  std::vector<std::filesystem::path> transformer_weights;
  nlohmann::json layout;
  nlohmann::json tokenizer;      // {"kind": ..., "file": absolute path or absent, options...}
  vq::VQConfig vq;
  std::vector<std::filesystem::path> vq_weights;
  nlohmann::json defaults;       // generation settings layer
  nlohmann::json raw;            // the whole bundle.json (families read their own sections)
  bool trust_code = false;       // the user allows TorchScript weights, which run code when loaded (--trust-code)
};

// A JSON file the user or a bundle names (a regular file, valid JSON); errors
// name the file. `what` says what it is ("config file").
nlohmann::json read_json_input(const std::filesystem::path& file, const std::string& what);

// Every id is a row of the model's embedding (transformer.vocab_size): a tokenizer whose ids run past
// it would otherwise fail inside the transformer. InputError naming the bundle otherwise.
void check_ids_in_vocabulary(const std::vector<int64_t>& ids, const Bundle& bundle);

// Reads and checks bundle.json in `dir` (files exist, numbers sane); the
// weights themselves are read and shape-checked when the model is built.
Bundle load_bundle(const std::filesystem::path& dir);

// The text tokenizer the bundle's "tokenizer" object describes.
std::unique_ptr<text::Tokenizer> load_bundle_tokenizer(const Bundle& bundle);

// What the bundle's family needs to build itself (weights may be null when only tokenizing).
family::FamilyContext family_context(const Bundle& bundle, const text::Tokenizer& tokenizer,
                                     const io::WeightMap* weights, int64_t resolution);

// The bundle's family at `resolution` (0: its own); a layout value of the wrong type is an InputError
// naming bundle.json's layout, an unsupported resolution std::invalid_argument naming the bundle.
std::unique_ptr<family::ImageFamily> make_bundle_family(const Bundle& bundle, const text::Tokenizer& tokenizer,
                                                        const io::WeightMap* weights, int64_t resolution);

// Refuses (InputError) a `resolution` the bundle's family cannot draw, before its weights are read: the
// family is built on the tokenizer alone. `asked_by` names where the value came from ("--resolution").
void check_resolution_supported(const Bundle& bundle, const text::Tokenizer& tokenizer, int64_t resolution,
                                const std::string& asked_by);

}  // namespace sjd::engine
