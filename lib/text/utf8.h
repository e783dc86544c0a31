#pragma once
// UTF-8 helpers shared by the tokenizers: walking code points, checking input,
// and turning arbitrary bytes back into valid text.
#include <cstddef>
#include <string>
#include <string_view>

namespace sjd::text::utf8 {

// Byte length of the sequence that `lead` starts (1 for ASCII and for stray bytes).
std::size_t sequence_length(unsigned char lead);

// The code point at byte `i` of valid UTF-8; moves `i` past it.
char32_t next(std::string_view text, std::size_t& i);

void append(std::string& out, char32_t code_point);

// The longest start of `text` of at most `bytes` bytes that ends between two code points.
std::string_view whole_prefix(std::string_view text, std::size_t bytes);

// Byte offset of the first ill-formed sequence (overlong forms, surrogates and
// values above U+10FFFF included), or npos when `bytes` is valid UTF-8.
std::size_t find_invalid(std::string_view bytes);

// `bytes` with every ill-formed sequence replaced by U+FFFD, one per maximal
// subpart (the Unicode recommendation, as Python's errors="replace" and Rust's
// from_utf8_lossy do), so decoders agree with the reference tokenizers.
std::string to_valid(std::string_view bytes);

}  // namespace sjd::text::utf8
