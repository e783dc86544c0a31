#include "text/literal_matcher.h"

#include <algorithm>
#include <functional>

namespace sjd::text {

void LiteralMatcher::add(const std::string& literal, int64_t value) {
  if (literal.empty()) return;  // it would match between every two bytes
  values_[literal] = value;
  auto& lengths = lengths_by_first_byte_[static_cast<unsigned char>(literal.front())];
  if (std::find(lengths.begin(), lengths.end(), literal.size()) == lengths.end()) {
    lengths.push_back(literal.size());
    std::sort(lengths.begin(), lengths.end(), std::greater<>());
  }
}

std::optional<LiteralMatcher::Match> LiteralMatcher::find(std::string_view text, std::size_t from) const {
  std::string candidate;
  for (std::size_t begin = from; begin < text.size(); ++begin) {
    for (const std::size_t length : lengths_by_first_byte_[static_cast<unsigned char>(text[begin])]) {
      if (length > text.size() - begin) continue;
      candidate.assign(text.data() + begin, length);
      const auto found = values_.find(candidate);
      if (found != values_.end()) return Match{begin, begin + length, found->second};
    }
  }
  return std::nullopt;
}

}  // namespace sjd::text
