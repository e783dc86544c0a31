#pragma once
// The charts beside the compare grid: per method, step compression and
// wall-clock speed-up against ar as bars (lossy methods in another colour and
// marked LOSSY), and the accepted-length histogram (share of steps that
// committed 1, 2, 3, 4, 5-8, ... tokens).
#include <string>

#include "engine/compare.h"
#include "io/canvas.h"
#include "io/text_renderer.h"

namespace sjd::engine {

// The charts' size for `report` at `width` pixels wide.
int compare_charts_height(const CompareReport& report, const io::TextRenderer& text);

// Draws both charts with their top-left corner at (x, y), `width` pixels wide.
void draw_compare_charts(io::Canvas& canvas, int x, int y, int width, const CompareReport& report,
                         const io::TextRenderer& text);

// The bar chart's title: "Speed-up against ar", or, when no run was timed against ar (a compare
// without it), a title that says the bars hold step compression alone.
std::string bars_title(const CompareReport& report);

// Histogram bins of the charts: [first, last] tokens committed in a step (last -1: open).
struct AcceptedBin {
  int first = 1;
  int last = 1;
};
const std::vector<AcceptedBin>& accepted_bins();
// The share of steps in each bin, from a row's accepted_share.
std::vector<double> binned_shares(const std::vector<double>& accepted_share);

}  // namespace sjd::engine
