#include "io/png_text.h"

#include "text/utf8.h"

namespace sjd::io {
namespace {

// Code points of a UTF-8 string; nullopt if it is not valid UTF-8 (overlong
// forms, surrogates and values past U+10FFFF included).
std::optional<std::u32string> decode_utf8(const std::string& utf8_text) {
  if (text::utf8::find_invalid(utf8_text) != std::string::npos) return std::nullopt;
  std::u32string code_points;
  for (size_t i = 0; i < utf8_text.size();) code_points.push_back(text::utf8::next(utf8_text, i));
  return code_points;
}

// The Latin-1 bytes of `text`; nullopt if a character lies beyond U+00FF.
std::optional<std::string> to_latin1(const std::u32string& code_points) {
  std::string latin1;
  for (char32_t c : code_points) {
    if (c > 0xFF) return std::nullopt;
    latin1.push_back(static_cast<char>(c));
  }
  return latin1;
}

std::string latin1_to_utf8(std::string_view latin1) {
  std::string utf8;
  for (char c : latin1) text::utf8::append(utf8, static_cast<uint8_t>(c));
  return utf8;
}

// The keyword in Latin-1, checked against the PNG specification's rules.
std::string checked_keyword(const std::string& keyword) {
  const std::string where = "PNG text keyword '" + keyword + "': ";
  auto code_points = decode_utf8(keyword);
  if (!code_points) throw std::invalid_argument(where + "not valid UTF-8");
  auto latin1 = to_latin1(*code_points);
  if (!latin1) throw std::invalid_argument(where + "has characters outside Latin-1");
  if (latin1->empty() || latin1->size() > 79) throw std::invalid_argument(where + "must be 1 to 79 characters");
  for (char c : *latin1) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte < 32 || (byte > 126 && byte < 161)) throw std::invalid_argument(where + "has a non-printable character");
  }
  if (latin1->front() == ' ' || latin1->back() == ' ' || latin1->find("  ") != std::string::npos) {
    throw std::invalid_argument(where + "has leading, trailing or consecutive spaces");
  }
  return *latin1;
}

}  // namespace

std::string encode_png_text_chunk(const std::string& keyword, const std::string& value) {
  const std::string latin1_keyword = checked_keyword(keyword);
  auto code_points = decode_utf8(value);
  if (!code_points) throw std::invalid_argument("PNG text '" + keyword + "': the value is not valid UTF-8");
  if (value.find('\0') != std::string::npos) {
    throw std::invalid_argument("PNG text '" + keyword + "': the value contains a NUL character");
  }
  if (auto latin1_value = to_latin1(*code_points)) {
    return encode_png_chunk("tEXt", latin1_keyword + '\0' + *latin1_value);
  }
  // iTXt: keyword, NUL, compression flag 0, method 0, empty language tag and
  // translated keyword (each NUL-terminated), then the UTF-8 text.
  return encode_png_chunk("iTXt", latin1_keyword + std::string("\0\0\0\0\0", 5) + value);
}

std::optional<std::pair<std::string, std::string>> decode_png_text_chunk(const PngChunk& chunk,
                                                                         const std::filesystem::path& file) {
  if (chunk.type != "tEXt" && chunk.type != "iTXt" && chunk.type != "zTXt") return std::nullopt;
  const std::string where = file.string() + ": " + chunk.type + " chunk";
  const size_t keyword_end = chunk.data.find('\0');
  if (keyword_end == std::string::npos || keyword_end == 0) throw PngError(where + ": no keyword");
  const std::string keyword = latin1_to_utf8(std::string_view(chunk.data).substr(0, keyword_end));
  const std::string named = where + " '" + keyword + "'";
  if (chunk.type == "zTXt") throw PngError(named + ": compressed text is not supported");
  if (chunk.type == "tEXt") {
    return std::make_pair(keyword, latin1_to_utf8(std::string_view(chunk.data).substr(keyword_end + 1)));
  }

  // iTXt: flag and method bytes, then language tag and translated keyword.
  if (chunk.data.size() < keyword_end + 3) throw PngError(named + ": truncated");
  if (chunk.data[keyword_end + 1] != '\0') throw PngError(named + ": compressed text is not supported");
  const size_t language_end = chunk.data.find('\0', keyword_end + 3);
  const size_t translated_end =
      language_end == std::string::npos ? std::string::npos : chunk.data.find('\0', language_end + 1);
  if (translated_end == std::string::npos) throw PngError(named + ": truncated");
  return std::make_pair(keyword, chunk.data.substr(translated_end + 1));
}

}  // namespace sjd::io
