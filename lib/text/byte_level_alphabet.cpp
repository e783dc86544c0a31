#include "text/byte_level_alphabet.h"

#include <array>
#include <vector>

#include "text/utf8.h"

namespace sjd::text {
namespace {

bool is_printable_latin1(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> spelling{};    // UTF-8 of each byte's character
  std::vector<unsigned char> byte_of_shifted;  // U+0100 + n stands for byte_of_shifted[n]
  Alphabet() {
    for (unsigned byte = 0; byte < 256; ++byte) {
      char32_t character = byte;
      if (!is_printable_latin1(byte)) {
        character = 0x100 + static_cast<char32_t>(byte_of_shifted.size());
        byte_of_shifted.push_back(static_cast<unsigned char>(byte));
      }
      utf8::append(spelling[byte], character);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

std::optional<unsigned char> byte_of_level_char(char32_t c) {
  if (c < 0x100) {
    if (is_printable_latin1(c)) return static_cast<unsigned char>(c);
    return std::nullopt;
  }
  const auto& shifted = alphabet().byte_of_shifted;
  if (c - 0x100 < shifted.size()) return shifted[c - 0x100];
  return std::nullopt;
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  const Alphabet& letters = alphabet();
  for (const char b : bytes) out += letters.spelling[static_cast<unsigned char>(b)];
  return out;
}

}  // namespace sjd::text
