#pragma once
// tokenizer.json normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Prepend, Strip, StripAccents and Sequence, with Hugging Face's semantics.
// Each piece of the input between added tokens is normalised on its own.
#include <memory>
#include <string>

#include "text/json_node.h"

namespace sjd::text::hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// The normalizer `node` describes (an object with "type"); unknown types are errors naming the key.
std::unique_ptr<Normalizer> parse_normalizer(const JsonNode& node);

}  // namespace sjd::text::hf
