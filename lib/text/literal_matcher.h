#pragma once
// Finds special and added tokens in text: the leftmost occurrence of any of a
// fixed set of strings, the longest one where several start at the same byte.
// The strings form a byte trie, so a search costs, per text byte, the bytes the
// text shares with some string from there -- not the strings' summed lengths
// (3000 added tokens "az...z" kept a 100 kB prompt searching for minutes).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sjd::text {

class LiteralMatcher {
 public:
  struct Match {
    std::size_t begin, end;  // byte range in the text
    int64_t value;
  };

  // Adds `literal` with the value a match reports; a repeated literal keeps the
  // last value, an empty one is ignored.
  void add(const std::string& literal, int64_t value);
  bool empty() const { return nodes_.size() == 1; }

  // The leftmost-longest match starting at or after byte `from`.
  std::optional<Match> find(std::string_view text, std::size_t from) const;

 private:
  // Node 0 is the root (the empty prefix); a node whose prefix is a whole literal holds its value.
  std::vector<std::optional<int64_t>> nodes_{std::nullopt};
  std::unordered_map<uint64_t, uint32_t> edges_;  // node * 256 + byte -> child node

  std::optional<uint32_t> child(uint32_t node, unsigned char byte) const;
};

}  // namespace sjd::text
