#pragma once
// Writes generated images as PNG with their settings (prompt, seed, method...)
// recorded in text chunks, so an image file says how it was made.
#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sjd::io {

// Encodes `rgb` (uint8 [H, W, 3]; copied to the CPU and made contiguous if it
// is not) with one text chunk per (keyword, value) pair, in order, right after
// IHDR, and writes the file atomically. Keywords and values are UTF-8 (see
// png_text.h for which chunk type a value gets). Throws std::invalid_argument
// for a bad image or text, FileError when the file cannot be written; both
// messages name the path.
void write_png(const std::filesystem::path& file, const at::Tensor& rgb,
               const std::vector<std::pair<std::string, std::string>>& text);
// The bytes write_png writes (`file` only names the image in errors).
std::string encode_png(const std::filesystem::path& file, const at::Tensor& rgb,
                       const std::vector<std::pair<std::string, std::string>>& text);

}  // namespace sjd::io
