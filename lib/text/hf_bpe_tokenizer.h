#pragma once
// A Hugging Face tokenizer.json with a BPE model (Chameleon / Lumina-mGPT):
// added tokens, normalizer, pre-tokenizer, model and decoder, run in
// Hugging Face's order. The post-processor (BOS/EOS templates) is not applied:
// the model families add their own structure tokens. Truncation and padding
// settings are ignored.
#include <filesystem>
#include <memory>

#include "text/hf_added_tokens.h"
#include "text/hf_bpe_model.h"
#include "text/hf_decoders.h"
#include "text/hf_normalizers.h"
#include "text/hf_pre_tokenizers.h"
#include "text/json_node.h"
#include "text/tokenizer.h"

namespace sjd::text {

class HfBpeTokenizer : public Tokenizer {
 public:
  HfBpeTokenizer(const std::filesystem::path& file, const JsonNode& options);

  // Added tokens in the text (special or not) become their ids, as in
  // Hugging Face's encode(text, add_special_tokens=False).
  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::optional<int64_t> token_id(const std::string& token) const override;

 private:
  std::string file_name_;
  std::unique_ptr<hf::Normalizer> normalizer_;      // may be null
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<hf::Decoder> decoder_;            // may be null: tokens are joined with spaces
  std::unique_ptr<hf::BpeModel> model_;
  std::unique_ptr<hf::AddedTokens> added_tokens_;
};

}  // namespace sjd::text
