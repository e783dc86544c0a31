#pragma once
// compare.png: the images of a compare as a labelled grid -- a column per method
// (header: the method, its step compression and wall-clock speed-up against ar,
// and its exactness, LOSSY in red), a row per prompt and seed (header: the prompt
// wrapped, and the seed), cells enlarged to a readable size with gaps between
// them -- and beside it the charts of compare_charts.h. A compare of more than
// 24 rows shows its first 24 (the title says so); the charts cover every run.
#include <vector>

#include "engine/compare.h"
#include "io/canvas.h"
#include "io/text_renderer.h"

namespace sjd::engine {

struct FigureRect {
  int x = 0, y = 0, width = 0, height = 0;
};

struct CompareFigure {
  at::Tensor image;                            // uint8 [H, W, 3]
  std::vector<std::vector<FigureRect>> cells;  // [prompt x seed row][method]: where each image is
  std::vector<FigureRect> column_headers;      // per method
  std::vector<FigureRect> row_headers;         // per row
  FigureRect charts;
  int gap = 0;                                 // pixels of background between cells
};

CompareFigure draw_compare_figure(const CompareReport& report, const CompareOptions& options,
                                  const io::TextRenderer& text);

// An image at a readable size: small ones enlarged by a whole factor (sharp
// pixels) to at least `target` pixels wide, large ones averaged down to `target`.
at::Tensor cell_image(const at::Tensor& rgb, int target);

}  // namespace sjd::engine
