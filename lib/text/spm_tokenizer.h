#pragma once
// SentencePiece models (LlamaGen's FLAN-T5 text encoder), run by the
// SentencePiece library itself. The text is encoded as given: clean it first
// with clean_caption() (caption_cleaning.h) where the model expects that, and
// append </s> where the model expects that.
#include <filesystem>
#include <memory>

#include "text/json_node.h"
#include "text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sjd::text {

class SpmTokenizer : public Tokenizer {
 public:
  SpmTokenizer(const std::filesystem::path& file, const JsonNode& options);
  ~SpmTokenizer() override;

  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  // The id of a piece as the model spells it ("▁the", "</s>"); nullopt for pieces it does not have.
  std::optional<int64_t> token_id(const std::string& token) const override;

 private:
  std::string file_name_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace sjd::text
