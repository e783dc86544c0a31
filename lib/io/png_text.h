#pragma once
// PNG text chunks. tEXt holds Latin-1 only, so values with characters beyond
// Latin-1 (most non-English prompts) go into uncompressed iTXt, which holds
// UTF-8; readers that know only tEXt still see every ASCII/Latin-1 value.
#include "io/png_chunks.h"

#include <optional>
#include <string>
#include <utility>

namespace sjd::io {

// The chunk for (keyword, value), both given in UTF-8: tEXt when the value is
// representable in Latin-1, otherwise uncompressed iTXt. Throws
// std::invalid_argument naming the keyword when the keyword is not 1-79
// printable Latin-1 characters without leading, trailing or double spaces, or
// when either string is not valid UTF-8 or contains a NUL.
std::string encode_png_text_chunk(const std::string& keyword, const std::string& value);

// The (keyword, value) of a tEXt or iTXt chunk, converted to UTF-8; nullopt
// for chunks that hold no text. Throws PngError naming `file` and the keyword
// for a malformed or compressed (zTXt, compressed iTXt) text chunk.
std::optional<std::pair<std::string, std::string>> decode_png_text_chunk(const PngChunk& chunk,
                                                                         const std::filesystem::path& file);

}  // namespace sjd::io
