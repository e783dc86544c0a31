#pragma once
// tokenizer.json pre-tokenizers: ByteLevel, Split, Digits, Punctuation,
// Whitespace, WhitespaceSplit, Metaspace and Sequence, with Hugging Face's
// semantics. They cut the pieces further (never across an added token) and
// ByteLevel also respells each piece in GPT-2's byte-level alphabet.
#include <memory>
#include <vector>

#include "text/hf_pieces.h"
#include "text/json_node.h"

namespace sjd::text::hf {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<TextPiece>& pieces) const = 0;
};

// The pre-tokenizer `node` describes (an object with "type"); unknown types are errors naming the key.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonNode& node);

}  // namespace sjd::text::hf
