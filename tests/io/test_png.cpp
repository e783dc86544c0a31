// PNG output: pixels decode back exactly (checked with stb_image, an
// independent decoder), text chunks survive in ASCII, Latin-1 and UTF-8, every
// CRC is right, and failures name the path.
#include "io/atomic_file.h"
#include "io/png_chunks.h"
#include "io/png_reader.h"
#include "io/png_writer.h"
#include "testing/test_support.h"

#include <catch2/catch.hpp>
#include <stb_image.h>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;
using TextPairs = std::vector<std::pair<std::string, std::string>>;

namespace {

// A [height, width, 3] image whose every byte differs from its neighbours.
at::Tensor test_image(int64_t height, int64_t width) {
  return (at::arange(height * width * 3, at::kLong) * 7 % 256).to(at::kByte).reshape({height, width, 3});
}

// CRC-32 computed bit by bit, independently of the table-driven one under test.
uint32_t bitwise_crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t be32(const std::string& bytes, size_t at) {
  return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
         (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
}

// Chunk types in file order, checking each stored CRC with bitwise_crc32.
std::vector<std::string> chunk_types_with_valid_crcs(const std::string& png) {
  std::vector<std::string> types;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t length = be32(png, at);
    REQUIRE(at + 12 + length <= png.size());
    INFO("chunk " << png.substr(at + 4, 4) << " at " << at);
    CHECK(be32(png, at + 8 + length) == bitwise_crc32(png.substr(at + 4, 4 + length)));
    types.push_back(png.substr(at + 4, 4));
    at += 12 + length;
  }
  return types;
}

}  // namespace

TEST_CASE("CRC-32 matches the standard check value", "[io][png]") {
  CHECK(io::png_crc32("123456789") == 0xCBF43926u);
  CHECK(io::png_crc32("") == 0u);
}

TEST_CASE("write_png stores pixels and text chunks that read back", "[io][png]") {
  TempDir dir("png_write");
  const auto file = dir / "image.png";
  const at::Tensor image = test_image(3, 5);
  const TextPairs text{{"prompt", "a red cube on a table"},
                       {"Comment", "caf\xC3\xA9 cr\xC3\xA8me"},  // Latin-1 representable: tEXt
                       {"prompt_zh", "\xE4\xB8\x80\xE5\x8F\xAA\xE7\x8C\xAB \xF0\x9F\x90\xB1"},  // 一只猫 🐱: iTXt
                       {"settings", "{\"seed\": 42,\n \"method\": \"sjd\"}"}};
  io::write_png(file, image, text);

  CHECK(io::read_png_text(file) == text);
  CHECK(io::read_png_size(file) == std::pair<uint32_t, uint32_t>{5, 3});

  const std::string png = sjd::testing::read_file(file);
  CHECK(chunk_types_with_valid_crcs(png) ==
        std::vector<std::string>{"IHDR", "tEXt", "tEXt", "iTXt", "tEXt", "IDAT", "IEND"});
  CHECK_THAT(png, Contains(std::string("Comment\0caf\xE9 cr\xE8me", 17)));  // stored as Latin-1 bytes

  int width = 0, height = 0, channels = 0;
  unsigned char* decoded = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(png.data()),
                                                 static_cast<int>(png.size()), &width, &height, &channels, 3);
  REQUIRE(decoded != nullptr);
  CHECK((width == 5 && height == 3 && channels == 3));
  const at::Tensor pixels = at::from_blob(decoded, {3, 5, 3}, at::kByte).clone();
  stbi_image_free(decoded);
  CHECK(at::equal(pixels, image));

  // Only the image is left in the directory: the temporary file was renamed.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator{}) == 1);
}

TEST_CASE("write_png accepts non-contiguous images and replaces existing files", "[io][png]") {
  TempDir dir("png_layout");
  const auto file = dir / "image.png";
  io::write_png(file, test_image(2, 2), {{"version", "1"}});
  const at::Tensor channels_first = test_image(4, 6).permute({2, 0, 1}).contiguous();
  io::write_png(file, channels_first.permute({1, 2, 0}), {{"version", "2"}});

  CHECK(io::read_png_text(file) == TextPairs{{"version", "2"}});
  CHECK(io::read_png_size(file) == std::pair<uint32_t, uint32_t>{6, 4});
  int width = 0, height = 0, channels = 0;
  unsigned char* decoded = stbi_load(file.c_str(), &width, &height, &channels, 3);
  REQUIRE(decoded != nullptr);
  const at::Tensor pixels = at::from_blob(decoded, {4, 6, 3}, at::kByte).clone();
  stbi_image_free(decoded);
  CHECK(at::equal(pixels, test_image(4, 6)));
}

TEST_CASE("write_png errors name the path", "[io][png]") {
  TempDir dir("png_errors");
  const at::Tensor image = test_image(2, 2);

  SECTION("directory that does not exist") {
    const auto file = dir / "missing" / "image.png";
    CHECK_THROWS_AS(io::write_png(file, image, {}), io::FileError);
    CHECK_THROWS_WITH(io::write_png(file, image, {}), Contains(file.string()));
  }
  SECTION("unwritable directory") {
    CHECK_THROWS_WITH(io::write_png("/proc/sjd_test_image.png", image, {}), Contains("/proc/sjd_test_image.png"));
  }
  SECTION("not a uint8 [H, W, 3] image") {
    const at::Tensor bad = GENERATE(at::zeros({2, 2, 3}), at::zeros({2, 2, 4}, at::kByte), at::zeros({6}, at::kByte),
                                    at::zeros({0, 2, 3}, at::kByte));
    const auto file = dir / "bad.png";
    CHECK_THROWS_AS(io::write_png(file, bad, {}), std::invalid_argument);
    CHECK_THROWS_WITH(io::write_png(file, bad, {}), Contains(file.string()) && Contains("uint8 [H, W, 3]"));
    CHECK_FALSE(std::filesystem::exists(file));
  }
  SECTION("keywords PNG does not allow") {
    const std::string keyword =
        GENERATE(std::string(""), std::string(80, 'k'), std::string(" lead"), std::string("two  spaces"),
                 std::string("tab\there"), std::string("\xE7\x8C\xAB"));
    const auto file = dir / "kw.png";
    CHECK_THROWS_AS(io::write_png(file, image, {{keyword, "value"}}), std::invalid_argument);
    CHECK_THROWS_WITH(io::write_png(file, image, {{keyword, "value"}}),
                      Contains(file.string()) && Contains("keyword '" + keyword + "'"));
  }
  SECTION("values that are not UTF-8 or hold NUL") {
    const std::string value = GENERATE(std::string("\xFF\xFE"), std::string("a\0b", 3), std::string("\xC0\xAF"));
    CHECK_THROWS_WITH(io::write_png(dir / "v.png", image, {{"prompt", value}}),
                      Contains("v.png") && Contains("'prompt'"));
  }
}

TEST_CASE("the PNG reader rejects corrupt files with the path", "[io][png]") {
  TempDir dir("png_corrupt");
  const auto file = dir / "image.png";
  io::write_png(file, test_image(2, 3), {{"prompt", "cube"}});
  const std::string good = sjd::testing::read_file(file);

  SECTION("flipped byte in a text chunk") {
    std::string bad = good;
    bad[bad.find("cube")] = 't';
    sjd::testing::write_file(file, bad);
    CHECK_THROWS_WITH(io::read_png_text(file), Contains(file.string()) && Contains("CRC mismatch") &&
                                                   Contains("tEXt"));
  }
  SECTION("truncated file") {
    sjd::testing::write_file(file, good.substr(0, good.size() - 6));
    CHECK_THROWS_AS(io::read_png_size(file), io::PngError);
  }
  SECTION("not a PNG") {
    sjd::testing::write_file(file, "GIF89a....");
    CHECK_THROWS_WITH(io::read_png_size(file), Contains(file.string()) && Contains("signature"));
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(io::read_png_text(dir / "absent.png"), Contains("absent.png"));
  }
}
