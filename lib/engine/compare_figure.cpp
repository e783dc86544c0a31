#include "engine/compare_figure.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "engine/compare_charts.h"
#include "engine/figure_style.h"

namespace sjd::engine {
namespace {

constexpr int kMargin = 16;
constexpr int kGap = 10;
constexpr int kCellTarget = 192;      // a 64-pixel image is drawn 3x, a 128-pixel one 2x
constexpr int kRowHeaderWidth = 210;
constexpr int kChartsWidth = 400;
constexpr int kChartsGap = 36;
constexpr int kPromptLines = 6;

std::string times(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << value << "x";
  return out.str();
}

// The lines under a method's name: what it saved, and what its images are.
std::vector<std::pair<std::string, io::Rgb>> column_lines(const CompareRow& row) {
  std::vector<std::pair<std::string, io::Rgb>> lines;
  lines.emplace_back(times(row.step_compression) + " step compression", style::kText);
  lines.emplace_back(row.speedup > 0.0 ? times(row.speedup) + " wall-clock speed-up" : "speed-up: no ar column",
                     style::kText);
  if (row.lossless) {
    lines.emplace_back(row.exactness, style::kMuted);
  } else {
    lines.emplace_back("LOSSY (relaxed acceptance)", style::kLossy);
  }
  return lines;
}

int column_header_height(const io::TextRenderer& text) {
  return text.line_height(style::kHeaderSize) + 3 * text.line_height(style::kSmallSize) + 4;
}

}  // namespace

at::Tensor cell_image(const at::Tensor& rgb, int target) {
  const int64_t width = rgb.size(1);
  if (width <= target) {
    const int64_t scale = std::max<int64_t>(1, (target + width - 1) / width);
    return rgb.repeat_interleave(scale, 0).repeat_interleave(scale, 1).contiguous();
  }
  const int64_t height = std::max<int64_t>(1, rgb.size(0) * target / width);
  const at::Tensor planes = rgb.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  return at::adaptive_avg_pool2d(planes, {height, target}).squeeze(0).permute({1, 2, 0}).round().clamp(0, 255)
      .to(at::kByte).contiguous();
}

CompareFigure draw_compare_figure(const CompareReport& report, const CompareOptions& options,
                                  const io::TextRenderer& text) {
  CompareFigure figure;
  figure.gap = kGap;
  const int methods = static_cast<int>(options.methods.size());
  const int all_rows = static_cast<int>(report.runs.size()) / std::max(1, methods);
  const int rows = std::min(all_rows, kCompareFigureRows);
  std::vector<at::Tensor> cells;
  for (int i = 0; i < rows * methods; ++i)
    cells.push_back(cell_image(report.runs[static_cast<size_t>(i)].image, kCellTarget));
  const int cell_w = static_cast<int>(cells.front().size(1));
  const int cell_h = static_cast<int>(cells.front().size(0));

  const int title_h = text.line_height(style::kTitleSize) + 8;
  const int header_h = column_header_height(text);
  const int grid_left = kMargin + kRowHeaderWidth + kGap;
  const int grid_top = kMargin + title_h + header_h + kGap;
  const int grid_right = grid_left + methods * cell_w + (methods - 1) * kGap;
  const int grid_bottom = grid_top + rows * cell_h + (rows - 1) * kGap;
  const int charts_left = grid_right + kChartsGap;
  const int charts_h = compare_charts_height(report, text);
  const int width = charts_left + kChartsWidth + kMargin;
  const int height = std::max(grid_bottom, grid_top + charts_h) + kMargin;
  io::Canvas canvas(width, height, style::kBackground);

  std::ostringstream title;
  title << "sjd compare: " << options.prompts.size() << " prompt" << (options.prompts.size() == 1 ? "" : "s") << " x "
        << options.seeds << " seed" << (options.seeds == 1 ? "" : "s") << ", " << methods << " method"
        << (methods == 1 ? "" : "s");
  if (rows < all_rows) title << " (the first " << rows << " of " << all_rows << " rows; every image is in runs/)";
  text.draw(canvas, kMargin, kMargin, title.str(), style::kTitleSize, style::kText);

  for (int m = 0; m < methods; ++m) {
    const CompareRow& row = report.rows[static_cast<size_t>(m)];
    const int x = grid_left + m * (cell_w + kGap);
    int y = kMargin + title_h;
    figure.column_headers.push_back({x, y, cell_w, header_h});
    text.draw(canvas, x, y, text.fit(row.entry, style::kHeaderSize, cell_w), style::kHeaderSize,
              row.lossless ? style::kText : style::kLossy);
    y += text.line_height(style::kHeaderSize);
    for (const auto& [line, colour] : column_lines(row)) {
      text.draw(canvas, x, y, text.fit(line, style::kSmallSize, cell_w), style::kSmallSize, colour);
      y += text.line_height(style::kSmallSize);
    }
  }
  figure.cells.assign(static_cast<size_t>(rows), {});
  for (int r = 0; r < rows; ++r) {
    const int y = grid_top + r * (cell_h + kGap);
    const CompareRun& first = report.runs[static_cast<size_t>(r * methods)];
    figure.row_headers.push_back({kMargin, y, kRowHeaderWidth, cell_h});
    int line_y = y;
    const std::string& prompt = options.prompts[static_cast<size_t>(first.prompt)];
    for (const std::string& line : text.wrap(prompt, style::kLabelSize, kRowHeaderWidth, kPromptLines)) {
      text.draw(canvas, kMargin, line_y, line, style::kLabelSize, style::kText);
      line_y += text.line_height(style::kLabelSize);
    }
    const uint64_t seed = options.base.seed + static_cast<uint64_t>(first.seed_index);
    text.draw(canvas, kMargin, line_y + 2, "seed " + std::to_string(seed), style::kSmallSize, style::kMuted);
    for (int m = 0; m < methods; ++m) {
      const int x = grid_left + m * (cell_w + kGap);
      canvas.draw_image(cells[static_cast<size_t>(r * methods + m)], x, y);
      figure.cells[static_cast<size_t>(r)].push_back({x, y, cell_w, cell_h});
    }
  }
  figure.charts = {charts_left, grid_top, kChartsWidth, charts_h};
  draw_compare_charts(canvas, charts_left, grid_top, kChartsWidth, report, text);
  figure.image = canvas.to_tensor();
  return figure;
}

}  // namespace sjd::engine
