#include "engine/compare_charts.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "engine/figure_style.h"

namespace sjd::engine {
namespace {

constexpr int kBarHeight = 12;
constexpr int kBarGap = 3;
constexpr int kMethodGap = 10;
constexpr int kSectionGap = 26;
constexpr int kHistogramHeight = 50;  // bars and the percentage above the tallest
constexpr int kValueWidth = 56;  // room for "12.34x" after the longest bar

std::string times(double value) {
  if (value <= 0.0) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << value << "x";
  return out.str();
}

std::string bin_name(const AcceptedBin& bin) {
  if (bin.last < 0) return std::to_string(bin.first) + "+";
  if (bin.first == bin.last) return std::to_string(bin.first);
  return std::to_string(bin.first) + "-" + std::to_string(bin.last);
}

// The method's name as the chart labels it, with its exactness when it is not exact.
void draw_method_label(io::Canvas& canvas, int x, int y, int width, const CompareRow& row,
                       const io::TextRenderer& text) {
  const std::string tag = row.lossless ? (row.exactness == "greedy" ? "  greedy" : "") : "  LOSSY";
  const int tag_width = text.width(tag, style::kLabelSize);
  const std::string name = text.fit(row.entry, style::kLabelSize, width - tag_width);
  text.draw(canvas, x, y, name, style::kLabelSize, style::kText);
  text.draw(canvas, x + text.width(name, style::kLabelSize), y, tag, style::kLabelSize,
            row.lossless ? style::kMuted : style::kLossy);
}

int legend_height(const io::TextRenderer& text) { return text.line_height(style::kSmallSize) + 6; }

int bars_height(const CompareReport& report, const io::TextRenderer& text) {
  const int per_method = text.line_height(style::kLabelSize) + 2 * kBarHeight + kBarGap + kMethodGap;
  return text.line_height(style::kHeaderSize) + legend_height(text) + per_method * static_cast<int>(report.rows.size());
}

// Step compression and wall-clock speed-up per method, on one scale with a mark at 1x.
int draw_bars(io::Canvas& canvas, int x, int y, int width, const CompareReport& report, const io::TextRenderer& text) {
  text.draw(canvas, x, y, bars_title(report), style::kHeaderSize, style::kText);
  y += text.line_height(style::kHeaderSize);
  // Legend: a swatch and a word for each bar kind.
  int lx = x;
  const int swatch = text.line_height(style::kSmallSize) - 4;
  for (const auto& [colour, word] : {std::pair<io::Rgb, const char*>{style::kCompression, "step compression"},
                                     {style::kSpeedup, "wall-clock speed-up"},
                                     {style::kSpeedupLossy, "(lossy method)"}}) {
    canvas.fill_rect(lx, y + 2, swatch, swatch, colour);
    text.draw(canvas, lx + swatch + 4, y, word, style::kSmallSize, style::kMuted);
    lx += swatch + 4 + text.width(word, style::kSmallSize) + 12;
  }
  y += legend_height(text);
  double largest = 1.0;
  for (const auto& row : report.rows) largest = std::max({largest, row.step_compression, row.speedup});
  const int bar_space = width - kValueWidth;
  const auto length = [&](double value) { return static_cast<int>(std::lround(value / largest * bar_space)); };
  const int chart_top = y;
  for (const auto& row : report.rows) {
    draw_method_label(canvas, x, y, width, row, text);
    y += text.line_height(style::kLabelSize);
    const io::Rgb speed = row.lossless ? style::kSpeedup : style::kSpeedupLossy;
    for (const auto& [value, colour] : {std::pair<double, io::Rgb>{row.step_compression, style::kCompression},
                                        {row.speedup, speed}}) {
      canvas.fill_rect(x, y, std::max(1, length(value)), kBarHeight, colour);
      text.draw(canvas, x + length(value) + 4, y - 1, times(value), style::kSmallSize, style::kText);
      y += kBarHeight + kBarGap;
    }
    y += kMethodGap - kBarGap;
  }
  // The 1x mark: left of it a method is slower than ar (or compresses nothing).
  canvas.fill_rect(x + length(1.0), chart_top, 1, y - chart_top - kMethodGap, style::kMuted);
  return y;
}

}  // namespace

std::string bars_title(const CompareReport& report) {
  const bool timed_against_ar =
      std::any_of(report.rows.begin(), report.rows.end(), [](const CompareRow& row) { return row.speedup > 0.0; });
  return timed_against_ar ? "Speed-up against ar" : "Step compression (no ar run to time a speed-up against)";
}

namespace {

int histogram_height(const CompareReport& report, const io::TextRenderer& text) {
  const int per_method = text.line_height(style::kLabelSize) + kHistogramHeight + kMethodGap;
  return text.line_height(style::kHeaderSize) + per_method * static_cast<int>(report.rows.size()) +
         text.line_height(style::kSmallSize) * 2;
}

// Per method, the share of steps that committed 1, 2, 3, ... tokens (small multiples, one scale).
int draw_histograms(io::Canvas& canvas, int x, int y, int width, const CompareReport& report,
                    const io::TextRenderer& text) {
  text.draw(canvas, x, y, "Tokens committed per step (share of steps)", style::kHeaderSize, style::kText);
  y += text.line_height(style::kHeaderSize);
  const std::vector<AcceptedBin>& bins = accepted_bins();
  const int slot = width / static_cast<int>(bins.size());
  for (const auto& row : report.rows) {
    const std::string mean = "mean " + times(row.step_compression).substr(0, times(row.step_compression).size() - 1) +
                             " tokens/step";
    const int mean_width = text.width(mean, style::kSmallSize);
    draw_method_label(canvas, x, y, width - mean_width - 8, row, text);
    text.draw(canvas, x + width - mean_width, y + 1, mean, style::kSmallSize, style::kMuted);
    y += text.line_height(style::kLabelSize);
    const std::vector<double> shares = binned_shares(row.accepted_share);
    const io::Rgb colour = row.lossless ? style::kSpeedup : style::kSpeedupLossy;
    const int label_h = text.line_height(style::kSmallSize);
    for (size_t b = 0; b < bins.size(); ++b) {
      const int h = static_cast<int>(std::lround(shares[b] * (kHistogramHeight - label_h)));
      const int bx = x + static_cast<int>(b) * slot;
      canvas.fill_rect(bx + 2, y + kHistogramHeight - h, slot - 4, h, colour);
      if (shares[b] >= 0.005) {  // the share as a number: small bars would otherwise read as none
        const std::string percent = std::to_string(static_cast<int>(std::lround(shares[b] * 100.0))) + "%";
        text.draw(canvas, bx + (slot - text.width(percent, style::kSmallSize)) / 2, y + kHistogramHeight - h - label_h,
                  percent, style::kSmallSize, style::kMuted);
      }
    }
    canvas.fill_rect(x, y + kHistogramHeight, slot * static_cast<int>(bins.size()), 1, style::kRule);
    y += kHistogramHeight + kMethodGap;
  }
  for (size_t b = 0; b < bins.size(); ++b) {
    const std::string name = bin_name(bins[b]);
    const int cx = x + static_cast<int>(b) * slot + (slot - text.width(name, style::kSmallSize)) / 2;
    text.draw(canvas, cx, y - kMethodGap + 2, name, style::kSmallSize, style::kMuted);
  }
  text.draw(canvas, x, y - kMethodGap + 2 + text.line_height(style::kSmallSize),
            "tokens per step (bar height: share of steps, full = 100%)", style::kSmallSize, style::kMuted);
  return y;
}

}  // namespace

const std::vector<AcceptedBin>& accepted_bins() {
  static const std::vector<AcceptedBin> bins = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 8}, {9, 16}, {17, 32}, {33, -1}};
  return bins;
}

std::vector<double> binned_shares(const std::vector<double>& accepted_share) {
  const std::vector<AcceptedBin>& bins = accepted_bins();
  std::vector<double> shares(bins.size(), 0.0);
  for (size_t n = 1; n < accepted_share.size(); ++n) {
    for (size_t b = 0; b < bins.size(); ++b) {
      if (static_cast<int>(n) >= bins[b].first && (bins[b].last < 0 || static_cast<int>(n) <= bins[b].last)) {
        shares[b] += accepted_share[n];
        break;
      }
    }
  }
  return shares;
}

int compare_charts_height(const CompareReport& report, const io::TextRenderer& text) {
  return bars_height(report, text) + kSectionGap + histogram_height(report, text);
}

void draw_compare_charts(io::Canvas& canvas, int x, int y, int width, const CompareReport& report,
                         const io::TextRenderer& text) {
  y = draw_bars(canvas, x, y, width, report, text);
  draw_histograms(canvas, x, y + kSectionGap, width, report, text);
}

}  // namespace sjd::engine
