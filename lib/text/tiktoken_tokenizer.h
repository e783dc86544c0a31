#pragma once
// The tiktoken-style byte-pair tokenizer of Qwen and Emu3: a vocabulary file of
// `base64(bytes) rank` lines, where the rank is both the token id and the merge
// priority. Encoding NFC-normalises the text (Qwen's tokenizer does), splits it
// with Qwen's regex, and merges each piece's bytes lowest rank first.
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_node.h"
#include "text/literal_matcher.h"
#include "text/regex.h"
#include "text/tokenizer.h"

namespace sjd::text {

// Qwen's pre-tokenizer pattern.
extern const char* const kQwenSplitPattern;

class TiktokenTokenizer : public Tokenizer {
 public:
  // `options`: {"special_tokens": {name: id}, "qwen_specials": bool} (see tokenizer.h).
  TiktokenTokenizer(const std::filesystem::path& file, const JsonNode& options);

  // Special tokens in the text are matched (leftmost, longest first) and emitted as their ids.
  std::vector<int64_t> encode(const std::string& utf8) const override;
  // Special-token names in the text are encoded as ordinary text.
  std::vector<int64_t> encode_ordinary(const std::string& utf8) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::optional<int64_t> token_id(const std::string& token) const override;

  std::size_t rank_count() const { return rank_of_bytes_.size(); }

 private:
  void load_ranks(const std::filesystem::path& file);
  void add_special(const std::string& name, int64_t id, const JsonNode& where);
  std::string normalized_input(const std::string& utf8) const;
  void encode_ordinary_into(std::string_view text, std::vector<int64_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int64_t>& ids) const;

  std::string file_name_;
  std::string token_bytes_;  // every token's bytes back to back; the views below point into it
  std::unordered_map<std::string_view, int64_t> rank_of_bytes_;
  std::unordered_map<int64_t, std::string_view> bytes_of_rank_;
  std::unordered_map<std::string, int64_t> special_ids_;
  std::unordered_map<int64_t, std::string> special_names_;
  LiteralMatcher specials_;
  Regex split_;
};

}  // namespace sjd::text
