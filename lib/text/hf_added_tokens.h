#pragma once
// The added tokens of a tokenizer.json ("added_tokens": [{id, content,
// single_word, lstrip, rstrip, normalized, special}]), matched in the text
// before the model sees it, as Hugging Face does: tokens with normalized=false
// in the raw text first, then tokens with normalized=true in each normalised
// piece (spelt as the normalizer spells them). Matches are leftmost-longest;
// a single_word token only matches between non-word characters, lstrip/rstrip
// tokens swallow the white space beside them. The `special` flag only tells a
// decoder which tokens to skip; sjd decodes every token, so it is not read.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/hf_normalizers.h"
#include "text/hf_pieces.h"
#include "text/json_node.h"
#include "text/literal_matcher.h"

namespace sjd::text::hf {

class AddedTokens {
 public:
  // `normalizer` (may be null) spells the normalized tokens as they appear after normalisation.
  AddedTokens(const JsonNode& list, const Normalizer* normalizer);

  // Cuts the added tokens that match in the raw text (normalized=false) out of the pieces.
  void split_raw(std::vector<TextPiece>& pieces) const { split(pieces, raw_matcher_); }
  // Cuts the added tokens that match in normalised text (normalized=true) out of the pieces.
  void split_normalized(std::vector<TextPiece>& pieces) const { split(pieces, normalized_matcher_); }

  std::optional<int64_t> id_of(const std::string& content) const;
  // The text an added token decodes to (its normalised spelling where it has one), or nullptr.
  const std::string* text_of(int64_t id) const;

 private:
  struct Token {
    std::string content;
    bool single_word, lstrip, rstrip;
  };
  void split(std::vector<TextPiece>& pieces, const LiteralMatcher& matcher) const;
  void split_one(const TextPiece& piece, const LiteralMatcher& matcher, std::vector<TextPiece>& out) const;

  std::unordered_map<int64_t, Token> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  std::unordered_map<int64_t, std::string> decoded_text_;
  LiteralMatcher raw_matcher_, normalized_matcher_;
};

}  // namespace sjd::text::hf
