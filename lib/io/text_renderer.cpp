#include "io/text_renderer.h"

#include <stb_truetype.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "text/utf8.h"

namespace sjd::io {
namespace {

// fonts-dejavu-core's regular face.
const char* const kDefaultFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr uintmax_t kMaxFontBytes = 64u << 20;  // DejaVu Sans is 0.7 MB
const char* const kEllipsis = "...";

std::vector<char32_t> code_points(std::string_view text) {
  const std::string valid = text::utf8::to_valid(text);
  std::vector<char32_t> out;
  for (size_t i = 0; i < valid.size();) out.push_back(text::utf8::next(valid, i));
  return out;
}

// Byte offsets after each code point of valid UTF-8 (prefix lengths for cutting text).
std::vector<size_t> prefix_ends(const std::string& valid) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < valid.size();) {
    text::utf8::next(valid, i);
    ends.push_back(i);
  }
  return ends;
}

// stb_truetype trusts its input: it reads wherever the table directory points, past the end of the
// bytes too, so a truncated font file crashed sjd. The directory and every table it lists must lie
// within the file. (Offsets inside the tables are still the font's to get right: fonts are the
// system's or the user's own files, not untrusted input; docs/security.md.)
bool tables_inside(const std::string& bytes, int64_t offset) {
  const auto byte = [&](int64_t at) { return static_cast<uint64_t>(static_cast<unsigned char>(bytes[at])); };
  const auto u16 = [&](int64_t at) { return byte(at) << 8 | byte(at + 1); };
  const auto u32 = [&](int64_t at) { return u16(at) << 16 | u16(at + 2); };
  const auto size = static_cast<int64_t>(bytes.size());
  if (offset < 0 || offset + 12 > size) return false;
  const int64_t count = static_cast<int64_t>(u16(offset + 4));
  if (offset + 12 + 16 * count > size) return false;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t entry = offset + 12 + 16 * i;
    if (u32(entry + 8) + u32(entry + 12) > static_cast<uint64_t>(size)) return false;
  }
  return true;
}

}  // namespace

TextRenderer::TextRenderer(const std::filesystem::path& font_file) : font_(std::make_unique<stbtt_fontinfo>()) {
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(font_file, error);
  if (error || bytes > kMaxFontBytes) {
    throw FontError(font_file.string() + ": cannot read the font" + (error ? ": " + error.message() : " (too large)"));
  }
  std::ifstream in(font_file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  font_bytes_ = content.str();
  const auto* data = reinterpret_cast<const unsigned char*>(font_bytes_.data());
  const int offset = font_bytes_.size() >= 12 ? stbtt_GetFontOffsetForIndex(data, 0) : -1;
  if (offset < 0 || !tables_inside(font_bytes_, offset)) {
    throw FontError(font_file.string() + ": not a TrueType font, or a truncated or damaged one (its tables run " +
                    "past its " + std::to_string(font_bytes_.size()) + " bytes)");
  }
  if (!stbtt_InitFont(font_.get(), data, offset)) throw FontError(font_file.string() + ": not a TrueType font");
  stbtt_GetFontVMetrics(font_.get(), &ascent_, &descent_, &line_gap_);
}

TextRenderer::~TextRenderer() = default;

std::filesystem::path TextRenderer::find_font() {
  std::error_code error;
  if (const char* chosen = std::getenv("SJD_FONT"); chosen != nullptr && *chosen != '\0') {
    if (!std::filesystem::is_regular_file(chosen, error)) {
      const bool folder = std::filesystem::is_directory(chosen, error);
      throw FontError(std::string("SJD_FONT=") + chosen +
                      (folder ? ": a folder, not a font file" : ": no such font file"));
    }
    return chosen;
  }
  if (!std::filesystem::is_regular_file(kDefaultFont, error)) {
    throw FontError(std::string("no font for the figure's labels: ") + kDefaultFont +
                    " is missing; install the Debian package fonts-dejavu-core (scripts/setup.sh does) or set "
                    "SJD_FONT to a .ttf file");
  }
  return kDefaultFont;
}

std::unique_ptr<TextRenderer> TextRenderer::system_font() { return std::make_unique<TextRenderer>(find_font()); }

float TextRenderer::scale(int size) const { return stbtt_ScaleForPixelHeight(font_.get(), static_cast<float>(size)); }

int TextRenderer::line_height(int size) const {
  return size + static_cast<int>(std::ceil(static_cast<float>(line_gap_) * scale(size)));
}

int TextRenderer::width(std::string_view text, int size) const {
  const float s = scale(size);
  float x = 0.0f;
  int previous = 0;
  for (const char32_t cp : code_points(text)) {
    const int glyph = stbtt_FindGlyphIndex(font_.get(), static_cast<int>(cp));
    if (previous != 0) x += s * static_cast<float>(stbtt_GetGlyphKernAdvance(font_.get(), previous, glyph));
    int advance = 0, bearing = 0;
    stbtt_GetGlyphHMetrics(font_.get(), glyph, &advance, &bearing);
    x += s * static_cast<float>(advance);
    previous = glyph;
  }
  return static_cast<int>(std::ceil(x));
}

void TextRenderer::draw(Canvas& canvas, int x, int y, std::string_view text, int size, Rgb colour) const {
  const float s = scale(size);
  const int baseline = y + static_cast<int>(std::lround(static_cast<float>(ascent_) * s));
  float pen = static_cast<float>(x);
  int previous = 0;
  for (const char32_t cp : code_points(text)) {
    const int glyph = stbtt_FindGlyphIndex(font_.get(), static_cast<int>(cp));
    if (previous != 0) pen += s * static_cast<float>(stbtt_GetGlyphKernAdvance(font_.get(), previous, glyph));
    int w = 0, h = 0, xoff = 0, yoff = 0;
    unsigned char* coverage = stbtt_GetGlyphBitmap(font_.get(), s, s, glyph, &w, &h, &xoff, &yoff);
    const int left = static_cast<int>(std::lround(pen)) + xoff;
    for (int gy = 0; gy < h; ++gy) {
      for (int gx = 0; gx < w; ++gx) {
        canvas.blend_pixel(left + gx, baseline + yoff + gy, colour,
                           static_cast<float>(coverage[gy * w + gx]) / 255.0f);
      }
    }
    stbtt_FreeBitmap(coverage, nullptr);
    int advance = 0, bearing = 0;
    stbtt_GetGlyphHMetrics(font_.get(), glyph, &advance, &bearing);
    pen += s * static_cast<float>(advance);
    previous = glyph;
  }
}

std::string TextRenderer::fit(std::string_view text, int size, int max_width) const {
  const std::string valid = text::utf8::to_valid(text);
  if (width(valid, size) <= max_width) return valid;
  const std::vector<size_t> ends = prefix_ends(valid);
  for (size_t n = ends.size(); n-- > 0;) {
    std::string candidate = valid.substr(0, ends[n]);
    while (!candidate.empty() && candidate.back() == ' ') candidate.pop_back();
    candidate += kEllipsis;
    if (width(candidate, size) <= max_width) return candidate;
  }
  return kEllipsis;
}

std::vector<std::string> TextRenderer::wrap(std::string_view text, int size, int max_width, int max_lines) const {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) words.push_back(word);
  std::vector<std::string> lines;
  std::string line;
  size_t next = 0;
  for (; next < words.size(); ++next) {
    const std::string candidate = line.empty() ? words[next] : line + " " + words[next];
    if (line.empty() || width(candidate, size) <= max_width) {
      line = candidate;
      continue;
    }
    if (static_cast<int>(lines.size()) + 1 == max_lines) break;  // the last line: ends in "..."
    lines.push_back(fit(line, size, max_width));
    line = words[next];
  }
  // Words left over do not fit after `line` (that is why the loop stopped), so fit() cuts and adds "...".
  for (size_t rest = next; rest < words.size(); ++rest) line += " " + words[rest];
  if (!line.empty() || lines.empty()) lines.push_back(fit(line, size, max_width));
  return lines;
}

}  // namespace sjd::io
