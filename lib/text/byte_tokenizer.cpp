#include "text/byte_tokenizer.h"

#include <limits>

#include "text/utf8.h"

namespace sjd::text {

ByteTokenizer::ByteTokenizer(const JsonNode& options) {
  options.reject_unknown_keys({"first_id"});
  // The id of byte 0x00 is the model's, not the file's: nothing in a byte vocabulary says where it starts.
  if (!options.find("first_id")) {
    options.fail("missing key \"first_id\" (the token id of byte 0x00 in the model's vocabulary)");
  }
  const JsonNode first_id = options.at("first_id");
  first_id_ = first_id.as_integer();
  if (first_id_ < 0) first_id.fail("must not be negative");
  // Byte 0xFF's id must be an int64 too (2^63 - 1 printed negative ids).
  if (first_id_ > std::numeric_limits<int64_t>::max() - 255) first_id.fail("too large for 256 byte ids after it");
}

std::vector<int64_t> ByteTokenizer::encode(const std::string& utf8) const {
  std::vector<int64_t> ids;
  ids.reserve(utf8.size());
  for (const char c : utf8) ids.push_back(first_id_ + static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  bytes.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < first_id_ || id >= first_id_ + 256) {
      throw TokenizerError("byte tokenizer: id " + std::to_string(id) + " is outside its ids " +
                           std::to_string(first_id_) + ".." + std::to_string(first_id_ + 255));
    }
    bytes += static_cast<char>(id - first_id_);
  }
  return utf8::to_valid(bytes);
}

std::optional<int64_t> ByteTokenizer::token_id(const std::string& token) const {
  if (token.size() != 1) return std::nullopt;
  return first_id_ + static_cast<unsigned char>(token[0]);
}

}  // namespace sjd::text
