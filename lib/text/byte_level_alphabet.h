#pragma once
// GPT-2's byte-level alphabet: every byte is spelt as one printable character
// (the printable Latin-1 bytes as themselves, the others as U+0100 onwards in
// byte order), so that byte-level BPE vocabularies are valid text.
#include <optional>
#include <string>
#include <string_view>

namespace sjd::text {

// The byte a character stands for, or nullopt for characters outside the alphabet.
std::optional<unsigned char> byte_of_level_char(char32_t c);

// Every byte of `bytes` spelt in the alphabet.
std::string to_byte_level(std::string_view bytes);

}  // namespace sjd::text
