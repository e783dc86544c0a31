#include "io/png_writer.h"

#include "io/atomic_file.h"
#include "io/png_chunks.h"
#include "io/png_text.h"

#include <stb_image_write.h>

#include <climits>
#include <sstream>

namespace sjd::io {
namespace {

// Where the text chunks go: after the signature and the 25-byte IHDR chunk
// (4 length + 4 type + 13 data + 4 CRC), which stb always writes first.
constexpr size_t kAfterHeader = 8 + 25;

void append_to_string(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

void check_image(const std::filesystem::path& file, const at::Tensor& rgb) {
  std::ostringstream found;
  if (!rgb.defined()) {
    found << "an undefined tensor";
  } else if (rgb.scalar_type() != at::kByte || rgb.dim() != 3 || rgb.size(2) != 3 || rgb.size(0) < 1 ||
             rgb.size(1) < 1) {
    found << rgb.scalar_type() << " tensor of shape " << rgb.sizes();
  } else if (rgb.size(1) * 3 + 1 > INT_MAX / rgb.size(0)) {  // stb sizes its row buffers in int
    found << "an image of " << rgb.size(1) << "x" << rgb.size(0) << " pixels, too large to encode";
  } else {
    return;
  }
  throw std::invalid_argument("cannot write " + file.string() + ": expected a uint8 [H, W, 3] image, got " +
                              found.str());
}

}  // namespace

std::string encode_png(const std::filesystem::path& file, const at::Tensor& rgb,
                       const std::vector<std::pair<std::string, std::string>>& text) {
  check_image(file, rgb);
  std::string text_chunks;
  for (const auto& [keyword, value] : text) {
    try {
      text_chunks += encode_png_text_chunk(keyword, value);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument("cannot write " + file.string() + ": " + error.what());
    }
  }

  const at::Tensor pixels = rgb.cpu().contiguous();
  const int height = static_cast<int>(pixels.size(0));
  const int width = static_cast<int>(pixels.size(1));
  std::string encoded;
  if (!stbi_write_png_to_func(append_to_string, &encoded, width, height, 3, pixels.data_ptr<uint8_t>(), width * 3)) {
    throw FileError("cannot write " + file.string() + ": PNG encoding failed");
  }
  if (encoded.size() < kAfterHeader || encoded.compare(12, 4, "IHDR") != 0) {
    throw FileError("cannot write " + file.string() + ": the encoder did not start with an IHDR chunk");
  }
  encoded.insert(kAfterHeader, text_chunks);
  return encoded;
}

void write_png(const std::filesystem::path& file, const at::Tensor& rgb,
               const std::vector<std::pair<std::string, std::string>>& text) {
  write_file_atomic(file, encode_png(file, rgb, text));
}

}  // namespace sjd::io
