#pragma once
// Regular expressions for the tokenizers' split and replace rules, run by PCRE2
// in UTF mode with Unicode properties (\p{L}, \p{N}, case folding).
//
// The patterns come from tokenizer files written for Rust's regex and
// Oniguruma, whose \s and \w are the Unicode White_Space and word classes.
// PCRE2's differ slightly (\s also takes U+180E; \w misses combining marks),
// so \s, \S, \w and \W are rewritten to the reference classes before compiling.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sjd::text {

class Regex {
 public:
  // `description` names the pattern in error messages (file and key).
  Regex(const std::string& pattern, const std::string& description);
  // A pattern matching `text` literally.
  static Regex literal(const std::string& text, const std::string& description);

  // The leftmost non-overlapping matches in `text` (valid UTF-8), as byte
  // ranges [first, second). After an empty match the search resumes one
  // character further on, as Oniguruma does.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

  // `text` with every match replaced by `replacement` (taken literally).
  std::string replace_all(std::string_view text, std::string_view replacement) const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;  // immutable once built, so copies share it
};

}  // namespace sjd::text
