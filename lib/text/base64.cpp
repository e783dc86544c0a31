#include "text/base64.h"

#include <array>

namespace sjd::text {
namespace {

constexpr int kInvalid = -1;

constexpr std::array<int, 256> make_digit_values() {
  std::array<int, 256> values{};
  for (int& v : values) v = kInvalid;
  const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) values[static_cast<unsigned char>(alphabet[i])] = i;
  return values;
}

constexpr std::array<int, 256> kDigitValues = make_digit_values();

}  // namespace

bool base64_decode(std::string_view encoded, std::string& out) {
  if (encoded.size() % 4 != 0) return false;
  std::size_t padding = 0;
  while (padding < 2 && padding < encoded.size() && encoded[encoded.size() - 1 - padding] == '=') ++padding;
  const std::size_t digits = encoded.size() - padding;
  unsigned buffer = 0;
  int bits = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const int value = kDigitValues[static_cast<unsigned char>(encoded[i])];
    if (value == kInvalid) return false;
    buffer = (buffer << 6) | static_cast<unsigned>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return true;
}

}  // namespace sjd::text
