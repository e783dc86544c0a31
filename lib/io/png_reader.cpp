#include "io/png_reader.h"

#include "io/png_text.h"

#include <stb_image.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace sjd::io {
namespace {

std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw PngError(file.string() + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw PngError(file.string() + ": cannot read");
  return bytes.str();
}

std::vector<PngChunk> read_chunks(const std::filesystem::path& file) {
  return parse_png_chunks(read_bytes(file), file);
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

at::Tensor read_png_rgb(const std::filesystem::path& file) {
  constexpr uint32_t kMaxSide = 16384;
  const auto [width, height] = read_png_size(file);
  if (width > kMaxSide || height > kMaxSide) {
    throw PngError(file.string() + ": " + std::to_string(width) + "x" + std::to_string(height) +
                   " pixels is over the " + std::to_string(kMaxSide) + "-pixel limit");
  }
  const std::string bytes = read_bytes(file);
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                                static_cast<int>(bytes.size()), &w, &h, &channels, 3);
  if (pixels == nullptr) throw PngError(file.string() + ": cannot decode: " + stbi_failure_reason());
  at::Tensor rgb = at::empty({h, w, 3}, at::kByte);
  std::copy(pixels, pixels + static_cast<size_t>(w) * h * 3, rgb.data_ptr<uint8_t>());
  stbi_image_free(pixels);
  return rgb;
}

}  // namespace sjd::io
