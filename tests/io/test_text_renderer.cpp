// Figure text (stb_truetype with the system's DejaVu Sans) and the canvas it draws on.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "io/canvas.h"
#include "io/text_renderer.h"
#include "testing/test_support.h"

using sjd::io::Canvas;
using sjd::io::Rgb;
using sjd::io::TextRenderer;

namespace {

const Rgb kWhite{255, 255, 255};
const Rgb kBlack{0, 0, 0};

// The bounding box of pixels that are not `background`: {x0, y0, x1, y1} (x1 < x0 when none).
std::array<int, 4> ink_box(const Canvas& canvas, Rgb background) {
  std::array<int, 4> box = {canvas.width(), canvas.height(), -1, -1};
  for (int y = 0; y < canvas.height(); ++y) {
    for (int x = 0; x < canvas.width(); ++x) {
      if (canvas.pixel(x, y) == background) continue;
      box = {std::min(box[0], x), std::min(box[1], y), std::max(box[2], x), std::max(box[3], y)};
    }
  }
  return box;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("canvas: rectangles and images are clipped, enlarged and blended", "[io][figure]") {
  Canvas canvas(10, 8, kWhite);
  canvas.fill_rect(-5, -5, 7, 7, kBlack);  // clipped to the top-left 2x2
  CHECK(canvas.pixel(1, 1) == kBlack);
  CHECK(canvas.pixel(2, 2) == kWhite);
  at::Tensor image = at::zeros({2, 2, 3}, at::kByte);
  image[0][1][0] = 200;  // one red pixel at (1, 0)
  canvas.draw_image(image, 6, 4, 2);
  CHECK(canvas.pixel(8, 4) == Rgb{200, 0, 0});
  CHECK(canvas.pixel(9, 5) == Rgb{200, 0, 0});
  CHECK(canvas.pixel(6, 4) == kBlack);
  canvas.blend_pixel(5, 5, kBlack, 0.5f);
  CHECK(canvas.pixel(5, 5) == Rgb{128, 128, 128});
  const at::Tensor out = canvas.to_tensor();
  CHECK(out.sizes() == at::IntArrayRef({8, 10, 3}));
  CHECK(out[4][8][0].item<int>() == 200);
  CHECK_THROWS_AS(Canvas(0, 5, kWhite), std::invalid_argument);
}

TEST_CASE("text renderer: the system font draws text where and as wide as it says", "[io][figure]") {
  const auto text = TextRenderer::system_font();
  Canvas canvas(300, 60, kWhite);
  const std::string label = "sjd-pac 4.65x";
  text->draw(canvas, 20, 10, label, 16, kBlack);
  const auto box = ink_box(canvas, kWhite);
  REQUIRE(box[2] >= box[0]);  // something was drawn
  CHECK(box[0] >= 19);
  CHECK(box[2] <= 20 + text->width(label, 16));
  CHECK(box[2] > 20 + text->width(label, 16) / 2);
  CHECK(box[1] >= 10);
  CHECK(box[3] < 10 + text->line_height(16) + 4);  // descenders stay within the line
  CHECK(text->width("sjd-pac 4.65x and more", 16) > text->width(label, 16));
  CHECK(text->width("", 16) == 0);
}

TEST_CASE("text renderer: wrapping and fitting keep to the width, with ... for what is left out", "[io][figure]") {
  const auto text = TextRenderer::system_font();
  const std::string prompt = "a black to yellow gradient background with a large purple circle at the top";
  const auto lines = text->wrap(prompt, 13, 150, 10);
  REQUIRE(lines.size() > 1);
  std::string joined;
  for (const auto& line : lines) {
    CHECK(text->width(line, 13) <= 150);
    joined += (joined.empty() ? "" : " ") + line;
  }
  CHECK(joined == prompt);
  const auto two = text->wrap(prompt, 13, 150, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[1].substr(two[1].size() - 3) == "...");
  CHECK(text->width(two[1], 13) <= 150);
  const std::string cut = text->fit(prompt, 13, 80);
  CHECK(cut.substr(cut.size() - 3) == "...");
  CHECK(text->width(cut, 13) <= 80);
  CHECK(text->fit("ok", 13, 80) == "ok");
}

TEST_CASE("text renderer: a missing or bad font is a clear error", "[io][figure]") {
  {
    ScopedEnv env("SJD_FONT", "/nonexistent/font.ttf");
    CHECK_THROWS_WITH(TextRenderer::find_font(), Catch::Contains("SJD_FONT=/nonexistent/font.ttf"));
  }
  sjd::testing::TempDir dir("bad_font");
  sjd::testing::write_file(dir / "font.ttf", "not a font at all");
  CHECK_THROWS_WITH(TextRenderer(dir / "font.ttf"), Catch::Contains("font.ttf: not a TrueType font"));
  // A truncated copy of a real font, and one whose table count was damaged, crashed the renderer.
  const std::string font = sjd::testing::read_file(TextRenderer::find_font());
  for (const size_t cut : {size_t{12}, size_t{400}, size_t{1000}, font.size() / 2, font.size() - 1}) {
    sjd::testing::write_file(dir / "cut.ttf", font.substr(0, cut));
    INFO("cut at " << cut);
    CHECK_THROWS_WITH(TextRenderer(dir / "cut.ttf"), Catch::Contains("cut.ttf: not a TrueType font"));
  }
  std::string many_tables = font;
  many_tables[4] = many_tables[5] = '\xff';
  sjd::testing::write_file(dir / "many.ttf", many_tables);
  CHECK_THROWS_WITH(TextRenderer(dir / "many.ttf"), Catch::Contains("truncated or damaged"));
}
