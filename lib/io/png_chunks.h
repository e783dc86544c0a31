#pragma once
// PNG's container format: an 8-byte signature, then chunks of
// (4-byte big-endian length, 4-byte type, data, CRC-32 of type and data).
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sjd::io {

// A PNG file that is malformed or cannot be read; the message names the path.
class PngError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view kPngSignature{"\x89PNG\r\n\x1a\n", 8};

// CRC-32 as PNG (and zlib) define it: polynomial 0xEDB88320, reflected,
// initial value and final XOR 0xFFFFFFFF.
uint32_t png_crc32(std::string_view bytes);

struct PngChunk {
  std::string type;  // four ASCII letters, e.g. "IHDR"
  std::string data;
};

// The complete bytes of one chunk, CRC included.
std::string encode_png_chunk(std::string_view type, std::string_view data);

// Splits a whole PNG file into its chunks, checking the signature, every
// chunk's bounds and CRC, that IHDR comes first and that IEND ends the file.
// Throws PngError naming `file` (used only in messages) and the chunk.
std::vector<PngChunk> parse_png_chunks(std::string_view bytes, const std::filesystem::path& file);

}  // namespace sjd::io
