#include "text/literal_matcher.h"

namespace sjd::text {

std::optional<uint32_t> LiteralMatcher::child(uint32_t node, unsigned char byte) const {
  const auto found = edges_.find(uint64_t{node} * 256 + byte);
  if (found == edges_.end()) return std::nullopt;
  return found->second;
}

void LiteralMatcher::add(const std::string& literal, int64_t value) {
  if (literal.empty()) return;  // it would match between every two bytes
  uint32_t node = 0;
  for (const char c : literal) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (const std::optional<uint32_t> next = child(node, byte)) {
      node = *next;
      continue;
    }
    const auto created = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
    edges_.emplace(uint64_t{node} * 256 + byte, created);
    node = created;
  }
  nodes_[node] = value;
}

std::optional<LiteralMatcher::Match> LiteralMatcher::find(std::string_view text, std::size_t from) const {
  for (std::size_t begin = from; begin < text.size(); ++begin) {
    std::optional<Match> longest;
    uint32_t node = 0;
    for (std::size_t at = begin; at < text.size(); ++at) {
      const std::optional<uint32_t> next = child(node, static_cast<unsigned char>(text[at]));
      if (!next) break;
      node = *next;
      if (nodes_[node]) longest = Match{begin, at + 1, *nodes_[node]};
    }
    if (longest) return longest;
  }
  return std::nullopt;
}

}  // namespace sjd::text
