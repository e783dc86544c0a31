#pragma once
// Unicode character data for the tokenizers, from ICU: normalisation forms,
// case mapping and the character classes the Hugging Face pre-tokenizers test.
// All strings are valid UTF-8.
#include <string>
#include <string_view>

namespace sjd::text::unicode {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

std::string normalize(std::string_view text, NormalForm form);

// Full lower-case mapping of each code point on its own (no context: a final
// capital sigma becomes σ), which is what Rust's char::to_lowercase gives the
// Hugging Face Lowercase normaliser.
std::string to_lower(std::string_view text);

bool is_white_space(char32_t c);   // the Unicode White_Space property
// True when `text` shows nothing: every code point is White_Space or default-ignorable (U+200B zero width
// space, U+FEFF, U+2060 word joiner...), as a prompt of ideographic spaces or zero-width characters is. The
// empty string is blank; invalid UTF-8 is not (it is refused for its bytes instead).
bool is_blank(std::string_view text);
bool is_numeric(char32_t c);       // general category Nd, Nl or No
bool is_punctuation(char32_t c);   // ASCII punctuation or a P* category
bool is_mark(char32_t c);          // general category M (combining marks)
bool is_word_character(char32_t c);  // Alphabetic, M*, Nd, Pc or Join_Control (regex \w)

}  // namespace sjd::text::unicode
