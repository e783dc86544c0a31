#pragma once
// Text for figures (compare grids, heatmap scales), drawn with stb_truetype from
// a TrueType font of the system: DejaVu Sans from Debian's fonts-dejavu-core
// (installed by scripts/setup.sh), or the file $SJD_FONT names. The font is found
// when a figure is asked for, not vendored; without one the error says what to
// install. Fonts are trusted like the rest of the system (stb_truetype does not
// defend against malicious font files).
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "io/canvas.h"

struct stbtt_fontinfo;

namespace sjd::io {

// No usable font: a runtime failure of the machine's set-up (exit code 1), not bad input.
class FontError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TextRenderer {
 public:
  explicit TextRenderer(const std::filesystem::path& font_file);
  ~TextRenderer();
  TextRenderer(const TextRenderer&) = delete;
  TextRenderer& operator=(const TextRenderer&) = delete;

  // $SJD_FONT when set (it must exist), else DejaVu Sans; throws FontError naming
  // what was looked for and the Debian package that provides it.
  static std::filesystem::path find_font();
  // A renderer with find_font()'s font.
  static std::unique_ptr<TextRenderer> system_font();

  // `size` is the font's pixel height (ascender to descender).
  int width(std::string_view text, int size) const;
  int line_height(int size) const;  // size plus the font's line gap
  // Draws one line of UTF-8 text with the top of its line at y (clipped to the canvas).
  void draw(Canvas& canvas, int x, int y, std::string_view text, int size, Rgb colour) const;
  // Splits at spaces into lines no wider than max_width (a word wider than that
  // is cut); at most max_lines lines, the last ending in "..." when text was left out.
  std::vector<std::string> wrap(std::string_view text, int size, int max_width, int max_lines) const;
  // The text, or its longest prefix plus "..." that fits in max_width.
  std::string fit(std::string_view text, int size, int max_width) const;

 private:
  float scale(int size) const;

  std::string font_bytes_;
  std::unique_ptr<stbtt_fontinfo> font_;
  int ascent_ = 0, descent_ = 0, line_gap_ = 0;  // font units
};

}  // namespace sjd::io
