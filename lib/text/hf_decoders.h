#pragma once
// tokenizer.json decoders: ByteLevel, ByteFallback, Metaspace, Fuse, Strip,
// Replace and Sequence, with Hugging Face's semantics. A decoder turns the
// list of token strings into a new list; the text is their concatenation.
#include <memory>
#include <string>
#include <vector>

#include "text/json_node.h"

namespace sjd::text::hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// The decoder `node` describes (an object with "type"); unknown types are errors naming the key.
std::unique_ptr<Decoder> parse_decoder(const JsonNode& node);

}  // namespace sjd::text::hf
