#pragma once
// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}): vocabulary,
// ranked merges (as "a b" strings or ["a", "b"] pairs), unknown-token and
// byte-fallback handling, continuing-subword prefix and end-of-word suffix,
// ignore_merges. Dropout is refused: sjd's encodings must be deterministic.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_node.h"
#include "text/pair_merge.h"

namespace sjd::text::hf {

class BpeModel {
 public:
  explicit BpeModel(const JsonNode& model);

  // Appends the ids of one pre-tokenized word. As in Hugging Face, a character
  // that has no token, no byte fallback and no unknown token is dropped.
  void tokenize(std::string_view word, std::vector<int64_t>& ids) const;

  std::optional<int64_t> id_of(const std::string& token) const;
  const std::string* token_of(int64_t id) const;  // nullptr for ids the vocabulary lacks

 private:
  void add_character(std::string_view word, std::size_t begin, std::size_t end, std::vector<MergeSymbol>& symbols,
                     std::optional<MergeSymbol>& pending_unknown) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<int64_t, std::string> tokens_by_id_;
  std::unordered_map<uint64_t, PairMerge> merges_;  // key: left id << 32 | right id
  std::optional<int64_t> unknown_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unknown_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::optional<int64_t> byte_token_ids_[256];  // <0xNN> tokens, for byte fallback
};

}  // namespace sjd::text::hf
