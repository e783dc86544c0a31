#include "text/utf8.h"

namespace sjd::text::utf8 {
namespace {

struct SequenceCheck {
  bool valid;          // a whole well-formed sequence starts here
  std::size_t length;  // its length, or the length of the maximal ill-formed subpart
};

// Table 3-7 of the Unicode standard: the allowed range of the second byte
// depends on the lead byte (this is what excludes overlongs and surrogates).
SequenceCheck check_at(std::string_view bytes, std::size_t i) {
  const auto lead = static_cast<unsigned char>(bytes[i]);
  if (lead < 0x80) return {true, 1};
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {false, 1};
  }
  std::size_t taken = 1;
  while (taken < length && i + taken < bytes.size()) {
    const auto byte = static_cast<unsigned char>(bytes[i + taken]);
    const unsigned char lo = taken == 1 ? low : 0x80;
    const unsigned char hi = taken == 1 ? high : 0xBF;
    if (byte < lo || byte > hi) break;
    ++taken;
  }
  return {taken == length, taken};
}

}  // namespace

std::size_t sequence_length(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

char32_t next(std::string_view text, std::size_t& i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const std::size_t length = sequence_length(lead);
  char32_t code_point = length == 1 ? lead : lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  }
  i += length;
  return code_point;
}

void append(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

std::string_view whole_prefix(std::string_view text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  std::size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // a continuation byte
  return text.substr(0, end);
}

std::size_t find_invalid(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size();) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const SequenceCheck check = check_at(bytes, i);
    if (!check.valid) return i;
    i += check.length;
  }
  return std::string_view::npos;
}

std::string to_valid(std::string_view bytes) {
  if (find_invalid(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (std::size_t i = 0; i < bytes.size();) {
    const SequenceCheck check = check_at(bytes, i);
    if (check.valid) {
      out.append(bytes.substr(i, check.length));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += check.length;
  }
  return out;
}

}  // namespace sjd::text::utf8
