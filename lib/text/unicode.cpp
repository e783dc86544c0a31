#include "text/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace sjd::text::unicode {
namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

const icu::Normalizer2& normalizer_for(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::NFC: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::NFD: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::NFKC: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::NFKD: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || normalizer == nullptr) {
    throw TokenizerError(std::string("ICU: cannot load the normalisation data: ") + u_errorName(status));
  }
  return *normalizer;
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  if (is_ascii(text)) return std::string(text);  // ASCII is invariant under every form
  const icu::Normalizer2& normalizer = normalizer_for(form);
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  normalizer.normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("ICU: normalisation failed: ") + u_errorName(status));
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      out += static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte + ('a' - 'A') : byte);
      ++i;
      continue;
    }
    const char32_t c = utf8::next(text, i);
    // One code point at a time so that no context-dependent rule applies.
    UChar source[2];
    int32_t source_length = 0;
    U16_APPEND_UNSAFE(source, source_length, c);
    UChar lowered[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t lowered_length = u_strToLower(lowered, 8, source, source_length, "", &status);
    if (U_FAILURE(status)) throw TokenizerError(std::string("ICU: lower-casing failed: ") + u_errorName(status));
    for (int32_t k = 0; k < lowered_length;) {
      UChar32 mapped;
      U16_NEXT(lowered, k, lowered_length, mapped);
      utf8::append(out, static_cast<char32_t>(mapped));
    }
  }
  return out;
}

bool is_white_space(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_blank(std::string_view text) {
  if (utf8::find_invalid(text) != std::string_view::npos) return false;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<UChar32>(utf8::next(text, i));
    if (!is_white_space(static_cast<char32_t>(c)) && !u_hasBinaryProperty(c, UCHAR_DEFAULT_IGNORABLE_CODE_POINT)) {
      return false;
    }
  }
  return true;
}

bool is_numeric(char32_t c) {
  const auto category = u_charType(static_cast<UChar32>(c));
  return category == U_DECIMAL_DIGIT_NUMBER || category == U_LETTER_NUMBER || category == U_OTHER_NUMBER;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return c > 0x20 && c < 0x7F && !((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'));
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

bool is_mark(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_M_MASK) != 0; }

bool is_word_character(char32_t c) {
  const auto character = static_cast<UChar32>(c);
  const auto mask = U_GET_GC_MASK(character);
  return u_hasBinaryProperty(character, UCHAR_ALPHABETIC) ||
         (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(character, UCHAR_JOIN_CONTROL);
}

}  // namespace sjd::text::unicode
