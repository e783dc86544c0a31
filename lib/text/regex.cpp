#include "text/regex.h"

#include <pcre2.h>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace sjd::text {
namespace {

// The reference engines' classes: White_Space (listed, because PCRE2's own
// space properties all take U+180E), and Rust's Unicode word class.
constexpr const char* kSpaceItems =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr const char* kWordItems = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";

// Rewrites \s \S \w \W (see regex.h). Inside a character class only the
// positive forms can be spelled as class items; \S and \W stay PCRE2's there.
std::string translate_pattern(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 'Q') {  // \Q...\E is literal text: copy it untouched
        const std::size_t end = pattern.find("\\E", i + 1);
        const std::size_t stop = end == std::string::npos ? pattern.size() : end + 2;
        out += "\\Q";
        out.append(pattern, i + 1, stop - (i + 1));
        i = stop - 1;
      } else if (escaped == 's' || escaped == 'w') {
        const char* items = escaped == 's' ? kSpaceItems : kWordItems;
        out += in_class ? std::string(items) : "[" + std::string(items) + "]";
      } else if ((escaped == 'S' || escaped == 'W') && !in_class) {
        out += "[^" + std::string(escaped == 'S' ? kSpaceItems : kWordItems) + "]";
      } else {
        out += '\\';
        out += escaped;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t end = pattern.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (end != std::string::npos) {
        out.append(pattern, i + 1, end + 2 - (i + 1));
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

// Per-thread match state: PCRE2 match data and JIT stacks must not be shared
// between threads, while the compiled pattern can be.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);  // only the whole match is read
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  std::string description;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, const std::string& description) {
  auto compiled = std::make_shared<Compiled>();
  compiled->description = description;
  const std::string translated = translate_pattern(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    throw TokenizerError(description + ": invalid regular expression \"" + pattern + "\": " +
                         reinterpret_cast<const char*>(message) + " (at offset " + std::to_string(error_offset) +
                         " of the PCRE2 form \"" + translated + "\")");
  }
  // JIT is only a speed-up: where it is unavailable the interpreter runs the same pattern.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  compiled_ = std::move(compiled);
}

Regex Regex::literal(const std::string& text, const std::string& description) {
  if (text.empty()) return Regex("(*FAIL)", description);  // an empty literal matches nothing
  std::string pattern;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool alphanumeric =
        (byte >= '0' && byte <= '9') || (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z');
    if (byte < 0x80 && !alphanumeric) pattern += '\\';  // backslash + non-alphanumeric is that character
    pattern += c;
  }
  return Regex(pattern, description);
}

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
  const std::size_t invalid = utf8::find_invalid(text);
  if (invalid != std::string_view::npos) {
    throw TokenizerError(compiled_->description + ": text is not valid UTF-8 at byte " +
                         std::to_string(invalid + 1));
  }
  thread_local MatchScratch scratch;
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, scratch.data,
                               scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw TokenizerError(compiled_->description + ": matching failed: " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    matches.emplace_back(ovector[0], ovector[1]);
    if (ovector[1] > ovector[0]) {
      start = ovector[1];
    } else if (ovector[1] < text.size()) {
      start = ovector[1] + utf8::sequence_length(static_cast<unsigned char>(text[ovector[1]]));
    } else {
      break;
    }
  }
  return matches;
}

std::string Regex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  for (const auto& [begin, end] : find_all(text)) {
    out.append(text.substr(copied, begin - copied));
    out.append(replacement);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace sjd::text
