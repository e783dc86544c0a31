#include "engine/step_heatmap.h"

#include <algorithm>
#include <cmath>

#include "engine/bundle.h"
#include "engine/compare_figure.h"
#include "engine/figure_style.h"
#include "io/png_writer.h"

namespace sjd::engine {
namespace {

constexpr int kMapTarget = 256;   // pixels across the map
constexpr int kMargin = 12;
constexpr int kPanelGap = 12;
constexpr int kBarWidth = 18;
constexpr int kTicks = 5;         // numbered steps on the colour bar
constexpr float kBlendAlpha = 0.6f;

// `rgb` resized to exactly height x width, nearest neighbour (the model's pixels stay sharp).
at::Tensor resize_nearest(const at::Tensor& rgb, int64_t height, int64_t width) {
  const at::Tensor planes = rgb.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  return at::upsample_nearest2d(planes, {height, width}).squeeze(0).permute({1, 2, 0}).to(at::kByte).contiguous();
}

// The map as colours, each cell `cell` pixels square.
at::Tensor coloured_map(const at::Tensor& steps, int last, int cell) {
  const int64_t h = steps.size(0), w = steps.size(1);
  at::Tensor rgb = at::empty({h, w, 3}, at::kByte);
  const auto s = steps.accessor<float, 2>();
  auto out = rgb.accessor<uint8_t, 3>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const io::Rgb c = step_colour(last > 0 ? s[y][x] / static_cast<float>(last) : 0.0f);
      out[y][x][0] = c.r, out[y][x][1] = c.g, out[y][x][2] = c.b;
    }
  }
  return rgb.repeat_interleave(cell, 0).repeat_interleave(cell, 1).contiguous();
}

// A vertical colour bar from the first step (top) to the last, with numbered ticks; returns its width.
int draw_colour_bar(io::Canvas& canvas, int x, int y, int height, int last, const io::TextRenderer& text) {
  for (int row = 0; row < height; ++row) {
    canvas.fill_rect(x, y + row, kBarWidth, 1, step_colour(height > 1 ? static_cast<float>(row) / (height - 1) : 0.f));
  }
  const int label = text.line_height(style::kSmallSize);
  int widest = 0;
  for (int t = 0; t < kTicks; ++t) {
    const int step = static_cast<int>(std::lround(static_cast<double>(last) * t / (kTicks - 1)));
    if (t > 0 && step == static_cast<int>(std::lround(static_cast<double>(last) * (t - 1) / (kTicks - 1)))) continue;
    const int ty = y + (last > 0 ? (height - 1) * step / last : 0);
    canvas.fill_rect(x + kBarWidth, ty, 4, 1, style::kText);
    const std::string number = std::to_string(step);
    text.draw(canvas, x + kBarWidth + 6, std::clamp(ty - label / 2, y - label / 2, y + height - label / 2), number,
              style::kSmallSize, style::kText);
    widest = std::max(widest, text.width(number, style::kSmallSize));
  }
  return kBarWidth + 6 + widest;
}

}  // namespace

HeatmapView parse_heatmap_view(const std::string& name) {
  if (name == "side") return HeatmapView::kSide;
  if (name == "blend") return HeatmapView::kBlend;
  if (name == "map") return HeatmapView::kMap;
  throw InputError("--heatmap-view '" + name + "': choose side (image and map side by side), blend (map over the "
                   "image) or map (the map alone)");
}

at::Tensor committed_step_map(const GenerationOutput& out, const family::TokenLayout& layout) {
  const int64_t w = layout.grid_width();
  at::Tensor steps = at::zeros({layout.grid_height(), w}, at::kFloat);
  auto s = steps.accessor<float, 2>();
  for (int64_t t = 0; t < layout.length(); ++t) {
    const int64_t c = layout.cell(t);
    if (c >= 0) s[c / w][c % w] = static_cast<float>(out.stats.committed_at_step[static_cast<size_t>(t)]);
  }
  return steps;
}

io::Rgb step_colour(float level) {
  // Dark blue (early) to yellow (late), so it reads like the SJD paper's Fig. 13.
  level = std::clamp(level, 0.0f, 1.0f);
  const auto byte = [](float v) { return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0f, 255.0f))); };
  return {byte(level * 255.0f), byte(level * 220.0f + 20.0f), byte((1.0f - level) * 160.0f + 40.0f)};
}

at::Tensor draw_step_heatmap(const GenerationOutput& out, const family::TokenLayout& layout, HeatmapView view,
                             const io::TextRenderer& text) {
  const at::Tensor steps = committed_step_map(out, layout);
  const int last = std::max(1, static_cast<int>(steps.max().item<float>()));
  const int cell = std::max<int>(1, kMapTarget / static_cast<int>(layout.grid_width()));
  const at::Tensor map = coloured_map(steps, last, cell);
  const int map_h = static_cast<int>(map.size(0)), map_w = static_cast<int>(map.size(1));
  const at::Tensor image = resize_nearest(out.image, map_h, map_w);

  const std::string title = view == HeatmapView::kMap ? "step that committed each token"
                          : view == HeatmapView::kBlend ? "step that committed each token, over the image"
                                                        : "image | step that committed each token";
  const int title_h = text.line_height(style::kLabelSize) + 4;
  const int caption_h = text.line_height(style::kSmallSize) + 4;
  const int panels = view == HeatmapView::kSide ? 2 : 1;
  const int bar_room = kBarWidth + 6 + text.width(std::to_string(last), style::kSmallSize) + 4;
  const std::string caption =
      std::to_string(out.stats.steps) + " steps; colour bar: step number, dark = early, yellow = late";
  // The method under the title, with its exactness label, in red when LOSSY (as in compare's figure): a
  // map of a relaxed run must not pass for an exact one.
  const std::string method = out.method.describe();
  const bool lossy = out.method.exactness() == decoding::Exactness::kLossy;
  const int method_w = text.width(method, style::kSmallSize);
  const int width = std::max({kMargin * 2 + panels * map_w + (panels - 1) * kPanelGap + kPanelGap + bar_room,
                              kMargin * 2 + text.width(title, style::kLabelSize), kMargin * 2 + method_w,
                              kMargin * 2 + text.width(caption, style::kSmallSize)});
  const int height = kMargin * 2 + title_h + caption_h + map_h + caption_h + text.line_height(style::kSmallSize) / 2;
  io::Canvas canvas(width, height, style::kBackground);
  text.draw(canvas, kMargin, kMargin, title, style::kLabelSize, style::kText);
  text.draw(canvas, kMargin, kMargin + title_h, method, style::kSmallSize, lossy ? style::kLossy : style::kMuted);
  const int top = kMargin + title_h + caption_h;
  int x = kMargin;
  if (view == HeatmapView::kSide) {
    canvas.draw_image(image, x, top);
    x += map_w + kPanelGap;
  }
  if (view == HeatmapView::kBlend) {
    canvas.draw_image(image, x, top);
    canvas.blend_image(map, x, top, 1, kBlendAlpha);
  } else {
    canvas.draw_image(map, x, top);
  }
  x += map_w + kPanelGap;
  draw_colour_bar(canvas, x, top, map_h, last, text);
  text.draw(canvas, kMargin, top + map_h + 4, caption, style::kSmallSize, style::kMuted);
  return canvas.to_tensor();
}

void write_step_heatmap(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                        const family::TokenLayout& layout, HeatmapView view, const io::TextRenderer& text) {
  io::write_png(file, draw_step_heatmap(out, layout, view, text),
                {{"description", "step that committed each image token, with a colour bar in steps"},
                 {"prompt", prompt},
                 {"seed", std::to_string(out.settings.seed)},
                 {"method", out.method.describe()},
                 {"exactness", decoding::exactness_name(out.method.exactness())},
                 {"Software", "sjd"}});
}

}  // namespace sjd::engine
