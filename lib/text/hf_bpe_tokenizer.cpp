#include "text/hf_bpe_tokenizer.h"

#include <algorithm>
#include <fstream>

#include "text/utf8.h"
#include "text/strict_json.h"

namespace sjd::text {
namespace {

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw TokenizerError(file.string() + ": cannot open the tokenizer file");
  try {
    return parse_strict_json(in, file.string());
  } catch (const StrictJsonError& error) {
    throw TokenizerError(error.what());
  }
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(const std::filesystem::path& file, const JsonNode& options)
    : file_name_(file.string()) {
  options.reject_unknown_keys({});
  const nlohmann::json document = read_json(file);
  const JsonNode root(document, file_name_);
  root.expect_object();
  if (const auto normalizer = root.find("normalizer")) normalizer_ = hf::parse_normalizer(*normalizer);
  if (const auto pre_tokenizer = root.find("pre_tokenizer")) pre_tokenizer_ = hf::parse_pre_tokenizer(*pre_tokenizer);
  if (const auto decoder = root.find("decoder")) decoder_ = hf::parse_decoder(*decoder);
  model_ = std::make_unique<hf::BpeModel>(root.at("model"));
  const auto added = root.find("added_tokens");
  const nlohmann::json no_tokens = nlohmann::json::array();
  added_tokens_ = std::make_unique<hf::AddedTokens>(added ? *added : JsonNode(no_tokens, file_name_, "added_tokens"),
                                                    normalizer_.get());
}

std::vector<int64_t> HfBpeTokenizer::encode(const std::string& utf8) const {
  const std::size_t invalid = utf8::find_invalid(utf8);
  if (invalid != std::string::npos) {
    throw TokenizerError("tokenizer " + file_name_ + ": the text is not valid UTF-8 at byte " +
                         std::to_string(invalid + 1));
  }
  const std::size_t first_character = utf8.empty() ? 0 : utf8::sequence_length(static_cast<unsigned char>(utf8[0]));
  std::vector<hf::TextPiece> pieces{{utf8, first_character, std::nullopt}};
  added_tokens_->split_raw(pieces);
  if (normalizer_) {
    for (hf::TextPiece& piece : pieces) {
      if (piece.token) continue;
      if (piece.starts_input()) {
        // What the first character becomes, normalised on its own (see TextPiece).
        piece.input_start_bytes = normalizer_->normalize(piece.text.substr(0, piece.input_start_bytes)).size();
      }
      piece.text = normalizer_->normalize(std::move(piece.text));
      piece.input_start_bytes = std::min(piece.input_start_bytes, piece.text.size());
    }
  }
  added_tokens_->split_normalized(pieces);
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  std::vector<int64_t> ids;
  for (const hf::TextPiece& piece : pieces) {
    if (piece.token) {
      ids.push_back(*piece.token);
    } else {
      model_->tokenize(piece.text, ids);
    }
  }
  return ids;
}

std::string HfBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    const std::string* token = added_tokens_->text_of(id);
    if (token == nullptr) token = model_->token_of(id);
    if (token == nullptr)
      throw TokenizerError("tokenizer " + file_name_ + ": id " + std::to_string(id) + " is not in the vocabulary");
    tokens.push_back(*token);
  }
  std::string text;
  if (decoder_) {
    for (const std::string& part : decoder_->decode_chain(std::move(tokens))) text += part;
  } else {
    for (std::size_t i = 0; i < tokens.size(); ++i) text += (i == 0 ? "" : " ") + tokens[i];
  }
  return utf8::to_valid(text);
}

std::optional<int64_t> HfBpeTokenizer::token_id(const std::string& token) const {
  if (const auto id = added_tokens_->id_of(token)) return id;
  return model_->id_of(token);
}

}  // namespace sjd::text
