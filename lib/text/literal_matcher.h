#pragma once
// Finds special and added tokens in text: the leftmost occurrence of any of a
// fixed set of strings, the longest one where several start at the same byte.
#include <array>
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
  bool empty() const { return values_.empty(); }

  // The leftmost-longest match starting at or after byte `from`.
  std::optional<Match> find(std::string_view text, std::size_t from) const;

 private:
  std::unordered_map<std::string, int64_t> values_;
  // Distinct literal lengths by first byte, longest first: the only substrings worth looking up.
  std::array<std::vector<std::size_t>, 256> lengths_by_first_byte_;
};

}  // namespace sjd::text
