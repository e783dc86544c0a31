#pragma once
// An RGB picture to compose figures on (compare grids, heatmap legends): filled
// rectangles, blended pixels (for text and overlays) and enlarged images. Every
// drawing call clips to the canvas, so a label that runs past an edge is cut,
// never written out of bounds.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace sjd::io {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  Rgb pixel(int x, int y) const;

  void fill_rect(int x, int y, int w, int h, Rgb colour);
  // Mixes `colour` into the pixel with weight `alpha` in [0, 1] (text coverage, overlays).
  void blend_pixel(int x, int y, Rgb colour, float alpha);
  // Draws a uint8 [H, W, 3] image with its top-left corner at (x, y), each pixel
  // `scale` x `scale` (nearest neighbour: the model's pixels stay sharp).
  void draw_image(const at::Tensor& rgb, int x, int y, int scale = 1);
  // Blends the image over what is there with weight `alpha` (same placement as draw_image).
  void blend_image(const at::Tensor& rgb, int x, int y, int scale, float alpha);

  at::Tensor to_tensor() const;  // uint8 [H, W, 3], a copy

 private:
  uint8_t* at(int x, int y) { return &pixels_[(static_cast<size_t>(y) * width_ + x) * 3]; }

  int width_;
  int height_;
  std::vector<uint8_t> pixels_;
};

}  // namespace sjd::io
