#pragma once
// Reads back what write_png records (for tests and `sjd inspect`): the text
// chunks and the image size, verifying the file's structure and every CRC.
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

}  // namespace sjd::io
