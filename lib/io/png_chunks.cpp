#include "io/png_chunks.h"

#include <array>
#include <cstdio>

namespace sjd::io {
namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> entries{};
    for (uint32_t byte = 0; byte < 256; ++byte) {
      uint32_t value = byte;
      for (int bit = 0; bit < 8; ++bit) value = (value & 1) ? 0xEDB88320u ^ (value >> 1) : value >> 1;
      entries[byte] = value;
    }
    return entries;
  }();
  return table;
}

uint32_t read_be32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

void append_be32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}

std::string hex(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

}  // namespace

uint32_t png_crc32(std::string_view bytes) {
  const auto& table = crc_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : bytes) crc = table[(crc ^ static_cast<uint8_t>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string encode_png_chunk(std::string_view type, std::string_view data) {
  std::string chunk;
  chunk.reserve(12 + data.size());
  append_be32(chunk, static_cast<uint32_t>(data.size()));
  chunk.append(type);
  chunk.append(data);
  append_be32(chunk, png_crc32(std::string_view(chunk).substr(4)));
  return chunk;
}

std::vector<PngChunk> parse_png_chunks(std::string_view bytes, const std::filesystem::path& file) {
  const std::string where = file.string() + ": ";
  if (bytes.substr(0, kPngSignature.size()) != kPngSignature) throw PngError(where + "not a PNG file (bad signature)");
  std::vector<PngChunk> chunks;
  size_t offset = kPngSignature.size();
  while (offset < bytes.size()) {
    const std::string at = "chunk at offset " + std::to_string(offset);
    if (bytes.size() - offset < 12) throw PngError(where + at + ": truncated chunk header");
    const uint32_t length = read_be32(bytes, offset);
    if (length > bytes.size() - offset - 12) throw PngError(where + at + ": length " + std::to_string(length) +
                                                            " runs past the end of the file");
    PngChunk chunk{std::string(bytes.substr(offset + 4, 4)), std::string(bytes.substr(offset + 8, length))};
    const uint32_t stored = read_be32(bytes, offset + 8 + length);
    const uint32_t computed = png_crc32(bytes.substr(offset + 4, 4 + length));
    if (stored != computed) {
      throw PngError(where + at + " ('" + chunk.type + "'): CRC mismatch (stored " + hex(stored) + ", computed " +
                     hex(computed) + ")");
    }
    if (chunks.empty() && chunk.type != "IHDR") throw PngError(where + "first chunk is '" + chunk.type + "', not IHDR");
    offset += 12 + length;
    const bool is_end = chunk.type == "IEND";
    chunks.push_back(std::move(chunk));
    if (is_end) {
      if (offset != bytes.size()) throw PngError(where + "data after the IEND chunk");
      return chunks;
    }
  }
  throw PngError(where + "no IEND chunk (file truncated?)");
}

}  // namespace sjd::io
