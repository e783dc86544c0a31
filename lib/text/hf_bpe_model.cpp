#include "text/hf_bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "text/utf8.h"

namespace sjd::text::hf {
namespace {

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

// One merge rule's two sides, from "a b" or ["a", "b"].
std::pair<std::string, std::string> parse_merge(const JsonNode& node) {
  if (node.value().is_string()) {
    const std::string line = node.as_string();
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      node.fail("expected two tokens separated by one space, found \"" + line + "\"");
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (node.array_size() != 2) node.fail("expected a pair of tokens, found " + node.value().dump());
  return {node.at(0).as_string(), node.at(1).as_string()};
}

}  // namespace

BpeModel::BpeModel(const JsonNode& model) {
  if (const auto type = model.find("type"); type && type->as_string() != "BPE") {
    type->fail("unsupported model \"" + type->as_string() + "\" (sjd reads BPE models)");
  }
  if (const auto dropout = model.find("dropout"); dropout && !dropout->value().is_null()) {
    if (!dropout->value().is_number()) dropout->fail("expected a number or null, found " + dropout->value().dump());
    if (dropout->value() != 0) dropout->fail("BPE dropout is not supported: encodings must be deterministic");
  }
  const JsonNode vocab = model.at("vocab");
  vocab.expect_object();
  vocab_.reserve(vocab.value().size());
  for (const auto& item : vocab.value().items()) {
    const JsonNode id_node = vocab.at(item.key());
    const int64_t id = id_node.as_integer();
    if (id < 0 || id > INT32_MAX) id_node.fail("token id " + std::to_string(id) + " is out of range");
    const auto [existing, inserted] = tokens_by_id_.emplace(id, item.key());
    if (!inserted) id_node.fail("id " + std::to_string(id) + " is also the id of \"" + existing->second + "\"");
    vocab_.emplace(item.key(), id);
  }

  continuing_subword_prefix_ = model.string_or("continuing_subword_prefix", "");
  end_of_word_suffix_ = model.string_or("end_of_word_suffix", "");
  fuse_unknown_ = model.bool_or("fuse_unk", false);
  byte_fallback_ = model.bool_or("byte_fallback", false);
  ignore_merges_ = model.bool_or("ignore_merges", false);
  if (const auto unknown = model.find("unk_token")) {
    const auto id = id_of(unknown->as_string());
    if (!id) unknown->fail("unknown token \"" + unknown->as_string() + "\" is not in model.vocab");
    unknown_id_ = id;
  }
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    byte_token_ids_[byte] = id_of(name);
  }

  const JsonNode merges = model.at("merges");
  const std::size_t count = merges.array_size();
  merges_.reserve(count);
  int64_t rank = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const JsonNode merge = merges.at(i);
    if (merge.value().is_string() && merge.as_string().rfind("#version", 0) == 0) continue;  // merges.txt header
    const auto [left, right] = parse_merge(merge);
    const auto left_id = id_of(left), right_id = id_of(right);
    if (!left_id) merge.fail("\"" + left + "\" is not in model.vocab");
    if (!right_id) merge.fail("\"" + right + "\" is not in model.vocab");
    // The right side carries the continuing-subword prefix, which the merged token has once.
    const std::string merged = left + right.substr(std::min(continuing_subword_prefix_.size(), right.size()));
    const auto merged_id = id_of(merged);
    if (!merged_id) merge.fail("the merged token \"" + merged + "\" is not in model.vocab");
    merges_[pair_key(*left_id, *right_id)] = PairMerge{rank++, *merged_id};  // a repeated pair keeps its last rank
  }
}

std::optional<int64_t> BpeModel::id_of(const std::string& token) const {
  const auto found = vocab_.find(token);
  if (found == vocab_.end()) return std::nullopt;
  return found->second;
}

const std::string* BpeModel::token_of(int64_t id) const {
  const auto found = tokens_by_id_.find(id);
  return found == tokens_by_id_.end() ? nullptr : &found->second;
}

void BpeModel::add_character(std::string_view word, std::size_t begin, std::size_t end,
                             std::vector<MergeSymbol>& symbols, std::optional<MergeSymbol>& pending_unknown) const {
  std::string spelled;
  if (begin != 0) spelled += continuing_subword_prefix_;
  spelled.append(word.substr(begin, end - begin));
  if (end == word.size()) spelled += end_of_word_suffix_;
  const std::size_t length = end - begin;

  if (const auto id = id_of(spelled)) {
    if (pending_unknown) symbols.push_back(*pending_unknown);
    pending_unknown.reset();
    symbols.push_back({begin, length, *id});
    return;
  }
  if (byte_fallback_) {
    bool all_bytes_known = true;
    for (const char c : spelled) all_bytes_known = all_bytes_known && byte_token_ids_[static_cast<unsigned char>(c)];
    if (all_bytes_known) {
      // Hugging Face leaves a pending unknown token waiting here, behind the bytes.
      for (std::size_t k = 0; k < spelled.size(); ++k) {
        symbols.push_back({begin + k, 1, *byte_token_ids_[static_cast<unsigned char>(spelled[k])]});
      }
      return;
    }
  }
  if (!unknown_id_) return;  // dropped, as Hugging Face does
  if (pending_unknown && fuse_unknown_) {
    pending_unknown->length += length;
    return;
  }
  if (pending_unknown) symbols.push_back(*pending_unknown);
  pending_unknown = MergeSymbol{begin, length, *unknown_id_};
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto whole = id_of(std::string(word))) {
      ids.push_back(*whole);
      return;
    }
  }
  std::vector<MergeSymbol> symbols;
  std::optional<MergeSymbol> pending_unknown;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t begin = i;
    i += utf8::sequence_length(static_cast<unsigned char>(word[i]));
    add_character(word, begin, std::min(i, word.size()), symbols, pending_unknown);
  }
  if (pending_unknown) symbols.push_back(*pending_unknown);
  const auto rank_of = [this](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<PairMerge> {
    const auto found = merges_.find(pair_key(left.id, right.id));
    if (found == merges_.end()) return std::nullopt;
    return found->second;
  };
  for (const MergeSymbol& symbol : merge_pairs(std::move(symbols), rank_of)) ids.push_back(symbol.id);
}

}  // namespace sjd::text::hf
