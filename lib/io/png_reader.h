#pragma once
// Reads back what write_png records (for tests and `sjd inspect`): the text
// chunks, the image size and its pixels, verifying the file's structure and every CRC.
#include <ATen/ATen.h>

#include "io/png_chunks.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sjd::io {

// The (keyword, value) pairs of the tEXt and iTXt chunks, in file order,
// converted to UTF-8. Throws PngError naming the path for an unreadable or
// malformed file, a bad CRC, or a compressed text chunk.
std::vector<std::pair<std::string, std::string>> read_png_text(const std::filesystem::path& file);

// (width, height) from IHDR, after the same checks.
std::pair<uint32_t, uint32_t> read_png_size(const std::filesystem::path& file);

// The pixels as uint8 [H, W, 3] (decoded with stb_image), after the same checks;
// images over 16384 pixels a side are refused before decoding.
at::Tensor read_png_rgb(const std::filesystem::path& file);

}  // namespace sjd::io
