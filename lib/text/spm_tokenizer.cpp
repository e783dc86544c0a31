#include "text/spm_tokenizer.h"

#include <sentencepiece_processor.h>

#include "text/utf8.h"

namespace sjd::text {

SpmTokenizer::SpmTokenizer(const std::filesystem::path& file, const JsonNode& options)
    : file_name_(file.string()), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  options.reject_unknown_keys({});
  const auto status = processor_->Load(file_name_);
  if (!status.ok()) throw TokenizerError(file_name_ + ": cannot load the SentencePiece model: " + status.ToString());
}

SpmTokenizer::~SpmTokenizer() = default;

std::vector<int64_t> SpmTokenizer::encode(const std::string& utf8) const {
  std::vector<int> pieces;
  const auto status = processor_->Encode(utf8, &pieces);
  if (!status.ok()) throw TokenizerError(file_name_ + ": SentencePiece encoding failed: " + status.ToString());
  return std::vector<int64_t>(pieces.begin(), pieces.end());
}

std::string SpmTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= processor_->GetPieceSize()) {
      throw TokenizerError(file_name_ + ": id " + std::to_string(id) + " is outside the SentencePiece vocabulary (" +
                           std::to_string(processor_->GetPieceSize()) + " pieces)");
    }
    pieces.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = processor_->Decode(pieces, &text);
  if (!status.ok()) throw TokenizerError(file_name_ + ": SentencePiece decoding failed: " + status.ToString());
  return utf8::to_valid(text);
}

std::optional<int64_t> SpmTokenizer::token_id(const std::string& token) const {
  const int id = processor_->PieceToId(token);
  // PieceToId answers unk_id for pieces it does not know.
  if (processor_->IsUnknown(id) && processor_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

}  // namespace sjd::text
