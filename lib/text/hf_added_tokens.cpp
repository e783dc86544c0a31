#include "text/hf_added_tokens.h"

#include <algorithm>

#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::text::hf {
namespace {

// The code point that ends text[0, end).
char32_t code_point_before(const std::string& text, std::size_t end) {
  std::size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return utf8::next(text, begin);
}

// Where the run of white space that ends at `end` begins.
std::size_t white_space_run_before(const std::string& text, std::size_t end) {
  std::size_t begin = end;
  while (begin > 0) {
    std::size_t previous = begin - 1;
    while (previous > 0 && (static_cast<unsigned char>(text[previous]) & 0xC0) == 0x80) --previous;
    std::size_t i = previous;
    if (!unicode::is_white_space(utf8::next(text, i))) break;
    begin = previous;
  }
  return begin;
}

// Where the run of white space that starts at `begin` ends.
std::size_t white_space_run_after(const std::string& text, std::size_t begin) {
  std::size_t end = begin;
  while (end < text.size()) {
    std::size_t i = end;
    if (!unicode::is_white_space(utf8::next(text, i))) break;
    end = i;
  }
  return end;
}

}  // namespace

AddedTokens::AddedTokens(const JsonNode& list, const Normalizer* normalizer) {
  for (std::size_t i = 0; i < list.array_size(); ++i) {
    const JsonNode entry = list.at(i);
    const JsonNode id_node = entry.at("id");
    const int64_t id = id_node.as_integer();
    if (id < 0) id_node.fail("must not be negative");
    Token token{entry.at("content").as_string(), entry.bool_or("single_word", false), entry.bool_or("lstrip", false),
                entry.bool_or("rstrip", false)};
    if (token.content.empty()) entry.at("content").fail("an added token cannot be empty");
    const bool normalized = entry.bool_or("normalized", true);
    if (tokens_.count(id) != 0) id_node.fail("id " + std::to_string(id) + " is given to two added tokens");
    // Two ids for one text: which one the text encodes to would be the last one's, without a word.
    if (const auto same = ids_.find(token.content); same != ids_.end()) {
      entry.at("content").fail("\"" + token.content + "\" is the content of ids " + std::to_string(same->second) +
                               " and " + std::to_string(id));
    }
    std::string matched_text = token.content;
    if (normalized && normalizer != nullptr) matched_text = normalizer->normalize(token.content);
    (normalized ? normalized_matcher_ : raw_matcher_).add(matched_text, id);
    decoded_text_[id] = matched_text;
    ids_[token.content] = id;
    tokens_.emplace(id, std::move(token));
  }
}

std::optional<int64_t> AddedTokens::id_of(const std::string& content) const {
  const auto found = ids_.find(content);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

const std::string* AddedTokens::text_of(int64_t id) const {
  const auto found = decoded_text_.find(id);
  return found == decoded_text_.end() ? nullptr : &found->second;
}

void AddedTokens::split(std::vector<TextPiece>& pieces, const LiteralMatcher& matcher) const {
  if (matcher.empty()) return;
  split_each(pieces, [&](const TextPiece& piece, std::vector<TextPiece>& out) { split_one(piece, matcher, out); });
}

void AddedTokens::split_one(const TextPiece& piece, const LiteralMatcher& matcher, std::vector<TextPiece>& out) const {
  const std::string& text = piece.text;
  const auto emit = [&](std::size_t begin, std::size_t end, std::optional<int64_t> token) {
    out.push_back(sub_piece(piece, begin, end, token));
  };
  std::size_t done = 0;  // text before this is already emitted
  std::size_t search_from = 0;
  while (const auto match = matcher.find(text, search_from)) {
    search_from = match->end;  // matches never overlap, even when one is rejected
    const Token& token = tokens_.at(match->value);
    std::size_t begin = match->begin, end = match->end;
    if (token.single_word) {
      const bool word_before = begin > 0 && unicode::is_word_character(code_point_before(text, begin));
      std::size_t after = end;
      const bool word_after = end < text.size() && unicode::is_word_character(utf8::next(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = white_space_run_before(text, begin);
    if (token.rstrip) end = white_space_run_after(text, end);
    begin = std::max(begin, done);  // white space an earlier token took stays with it
    if (end <= begin) continue;      // the match lies inside that white space
    if (done < begin) emit(done, begin, std::nullopt);
    emit(begin, end, match->value);
    done = end;
  }
  if (done < text.size()) emit(done, text.size(), std::nullopt);
}

}  // namespace sjd::text::hf
