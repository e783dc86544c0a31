#include "io/png_reader.h"

#include "io/png_text.h"

#include <fstream>
#include <sstream>

namespace sjd::io {
namespace {

std::vector<PngChunk> read_chunks(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw PngError(file.string() + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw PngError(file.string() + ": cannot read");
  return parse_png_chunks(bytes.str(), file);
}

uint32_t be32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> read_png_text(const std::filesystem::path& file) {
  std::vector<std::pair<std::string, std::string>> text;
  for (const PngChunk& chunk : read_chunks(file)) {
    if (auto entry = decode_png_text_chunk(chunk, file)) text.push_back(std::move(*entry));
  }
  return text;
}

std::pair<uint32_t, uint32_t> read_png_size(const std::filesystem::path& file) {
  const std::vector<PngChunk> chunks = read_chunks(file);
  const std::string& header = chunks.front().data;  // parse_png_chunks checked it is IHDR
  if (header.size() != 13) throw PngError(file.string() + ": IHDR holds " + std::to_string(header.size()) +
                                          " bytes, not 13");
  return {be32(header, 0), be32(header, 4)};
}

}  // namespace sjd::io
