#pragma once
// The tiny default model's tokenizer: each UTF-8 byte b is the token first_id + b.
#include "text/json_node.h"
#include "text/tokenizer.h"

namespace sjd::text {

class ByteTokenizer : public Tokenizer {
 public:
  // `options`: {"first_id": N}, N >= 0.
  explicit ByteTokenizer(const JsonNode& options);

  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  // The id of a one-byte token.
  std::optional<int64_t> token_id(const std::string& token) const override;

 private:
  int64_t first_id_;
};

}  // namespace sjd::text
