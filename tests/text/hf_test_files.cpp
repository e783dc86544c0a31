#include "hf_test_files.h"

#include <map>
#include <stdexcept>

namespace sjd::text::testing {

nlohmann::json bpe_tokenizer(const std::vector<std::string>& tokens, const std::vector<std::string>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (std::size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}}}};
}

nlohmann::json piece_revealing_tokenizer(const std::vector<std::string>& tokens) {
  nlohmann::json document = bpe_tokenizer(tokens, {});
  document["model"]["ignore_merges"] = true;
  return document;
}

std::unique_ptr<Tokenizer> load_bpe(const sjd::testing::TempDir& dir, const nlohmann::json& document,
                                    const std::string& name) {
  sjd::testing::write_file(dir / name, document.dump());
  return load_tokenizer("bpe", dir / name, nlohmann::json::object());
}

std::vector<std::string> token_strings(const Tokenizer& tokenizer, const nlohmann::json& document,
                                       const std::string& text) {
  std::map<int64_t, std::string> spelling;
  for (const auto& item : document.at("model").at("vocab").items()) spelling[item.value().get<int64_t>()] = item.key();
  for (const auto& added : document.at("added_tokens")) {
    spelling[added.at("id").get<int64_t>()] = added.at("content").get<std::string>();
  }
  std::vector<std::string> out;
  for (const int64_t id : tokenizer.encode(text)) {
    const auto found = spelling.find(id);
    if (found == spelling.end()) throw std::logic_error("encoding has id " + std::to_string(id) + " outside the vocabulary");
    out.push_back(found->second);
  }
  return out;
}

}  // namespace sjd::text::testing
