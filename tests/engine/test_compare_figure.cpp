// compare.png as a person reads it: labelled column and row headers, cells
// enlarged and separated by uniform gaps, charts beside the grid.
#include <catch2/catch.hpp>

#include "engine/compare_charts.h"
#include "engine/compare_figure.h"
#include "engine/figure_style.h"

using namespace sjd::engine;
using sjd::io::Rgb;

namespace {

// Two prompts x one seed x three methods (the last one lossy), each cell one flat colour.
std::pair<CompareReport, CompareOptions> synthetic_compare() {
  CompareOptions options;
  options.prompts = {"a large red triangle in the centre, on a purple background", "a small green ring"};
  options.methods = {"ar", "sjd-pac", "sjd-pac:lantern"};
  options.seeds = 1;
  options.base.seed = 7;
  CompareReport report;
  for (int m = 0; m < 3; ++m) {
    CompareRow row;
    row.entry = options.methods[static_cast<size_t>(m)];
    row.lossless = m < 2;
    row.exactness = m < 2 ? "exact" : "lossy";
    row.step_compression = 1.0 + 2.0 * m;
    row.speedup = 1.0 + 0.5 * m;
    row.accepted_share = m == 0 ? std::vector<double>{0.0, 1.0} : std::vector<double>{0.0, 0.5, 0.25, 0.0, 0.0, 0.25};
    report.rows.push_back(row);
  }
  for (int i = 0; i < 6; ++i) {
    CompareRun run;
    run.index = i;
    run.prompt = i / 3;
    run.method = i % 3;
    run.image = at::full({64, 64, 3}, 40 + 30 * i, at::kByte);
    report.runs.push_back(run);
  }
  return {report, options};
}

bool uniform(const at::Tensor& image, const FigureRect& r, Rgb colour) {
  const at::Tensor band = image.slice(0, r.y, r.y + r.height).slice(1, r.x, r.x + r.width);
  const at::Tensor expected = at::tensor({colour.r, colour.g, colour.b}, at::kByte);
  return band.numel() > 0 && band.eq(expected).all().item<bool>();
}

// Distinct colours in a region (a header with text has many: ink and its antialiasing).
int64_t distinct_colours(const at::Tensor& image, const FigureRect& r) {
  const at::Tensor band = image.slice(0, r.y, r.y + r.height).slice(1, r.x, r.x + r.width).reshape({-1, 3});
  return std::get<0>(at::unique_dim(band, 0)).size(0);
}

bool contains_colour(const at::Tensor& image, const FigureRect& r, Rgb colour) {
  const at::Tensor band = image.slice(0, r.y, r.y + r.height).slice(1, r.x, r.x + r.width);
  const at::Tensor expected = at::tensor({colour.r, colour.g, colour.b}, at::kByte);
  return band.eq(expected).all(-1).any().item<bool>();
}

}  // namespace

TEST_CASE("compare figure: labelled headers, enlarged cells, uniform gaps and charts", "[engine][figure]") {
  const auto [report, options] = synthetic_compare();
  const auto text = sjd::io::TextRenderer::system_font();
  const CompareFigure figure = draw_compare_figure(report, options, *text);
  const at::Tensor& image = figure.image;
  REQUIRE(figure.cells.size() == 2);
  REQUIRE(figure.cells[0].size() == 3);
  REQUIRE(figure.gap > 0);

  for (size_t r = 0; r < 2; ++r) {
    for (size_t m = 0; m < 3; ++m) {
      const FigureRect& cell = figure.cells[r][m];
      CHECK(cell.width == 192);  // 64-pixel images drawn 3x
      const uint8_t shade = static_cast<uint8_t>(40 + 30 * (r * 3 + m));
      INFO("cell " << r << "," << m);
      CHECK(uniform(image, cell, {shade, shade, shade}));  // the run's own image, in its place
    }
  }
  // Between neighbouring cells: a band of background as wide as the gap, the grid's full height/width.
  const FigureRect& first = figure.cells[0][0];
  const FigureRect& last = figure.cells[1][2];
  const int grid_height = last.y + last.height - first.y;
  const int grid_width = last.x + last.width - first.x;
  for (size_t m = 0; m + 1 < 3; ++m) {
    const FigureRect& left = figure.cells[0][m];
    CHECK(figure.cells[0][m + 1].x - (left.x + left.width) == figure.gap);
    CHECK(uniform(image, {left.x + left.width, first.y, figure.gap, grid_height}, style::kBackground));
  }
  CHECK(figure.cells[1][0].y - (first.y + first.height) == figure.gap);
  CHECK(uniform(image, {first.x, first.y + first.height, grid_width, figure.gap}, style::kBackground));

  // Headers carry text: many colours (ink and antialiasing), not a flat band.
  for (const FigureRect& header : figure.column_headers) CHECK(distinct_colours(image, header) > 10);
  for (const FigureRect& header : figure.row_headers) CHECK(distinct_colours(image, header) > 10);
  CHECK(contains_colour(image, figure.column_headers[2], style::kLossy));  // the lossy column says so in red
  CHECK_FALSE(contains_colour(image, figure.column_headers[0], style::kLossy));
  // The charts: speed-up bars (a lossy method's in its own colour) and histograms.
  CHECK(contains_colour(image, figure.charts, style::kSpeedup));
  CHECK(contains_colour(image, figure.charts, style::kSpeedupLossy));
  CHECK(contains_colour(image, figure.charts, style::kCompression));
  CHECK(figure.charts.x >= last.x + last.width);
}

TEST_CASE("compare figure: large images are averaged down, small ones enlarged by whole factors", "[engine][figure]") {
  const at::Tensor small = at::randint(0, 255, {64, 64, 3}, at::kByte);
  const at::Tensor enlarged = cell_image(small, 192);
  CHECK(enlarged.sizes() == at::IntArrayRef({192, 192, 3}));
  CHECK(at::equal(enlarged.slice(0, 3, 6).slice(1, 0, 3), small[1][0].expand({3, 3, 3})));
  const at::Tensor large = at::full({768, 512, 3}, 90, at::kByte);
  const at::Tensor reduced = cell_image(large, 192);
  CHECK(reduced.sizes() == at::IntArrayRef({288, 192, 3}));
  CHECK(reduced.eq(90).all().item<bool>());
}

TEST_CASE("compare charts: the bars' title says when no ar run was timed", "[engine][figure]") {
  auto [report, options] = synthetic_compare();
  CHECK(bars_title(report) == "Speed-up against ar");
  for (CompareRow& row : report.rows) row.speedup = 0.0;  // what a compare without ar reports
  CHECK(bars_title(report) == "Step compression (no ar run to time a speed-up against)");
}

TEST_CASE("compare charts: accepted lengths are binned 1, 2, 3, 4, 5-8, ... and keep their share", "[engine][figure]") {
  // [n] = share of steps that committed n tokens.
  std::vector<double> share(40, 0.0);
  share[1] = 0.4, share[2] = 0.1, share[6] = 0.2, share[8] = 0.1, share[20] = 0.1, share[39] = 0.1;
  const std::vector<double> bins = binned_shares(share);
  REQUIRE(bins.size() == accepted_bins().size());
  CHECK(bins[0] == Approx(0.4));
  CHECK(bins[1] == Approx(0.1));
  CHECK(bins[4] == Approx(0.3));  // 5-8
  CHECK(bins[6] == Approx(0.1));  // 17-32
  CHECK(bins[7] == Approx(0.1));  // 33+
  double total = 0.0;
  for (const double b : bins) total += b;
  CHECK(total == Approx(1.0));
}

TEST_CASE("compare figure: a long compare shows its first 24 rows and says so", "[engine][figure]") {
  auto [report, options] = synthetic_compare();
  options.prompts.resize(40, "a prompt");
  for (int i = 6; i < 40 * 3; ++i) {
    CompareRun run = report.runs[static_cast<size_t>(i % 6)];
    run.index = i;
    run.prompt = i / 3;
    report.runs.push_back(run);
  }
  const auto text = sjd::io::TextRenderer::system_font();
  const CompareFigure figure = draw_compare_figure(report, options, *text);
  CHECK(figure.cells.size() == 24);
  CHECK(figure.image.size(0) < 24 * 220 + 400);
}
