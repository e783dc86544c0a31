#include "io/canvas.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sjd::io {
namespace {

uint8_t mix(uint8_t under, uint8_t over, float alpha) {
  return static_cast<uint8_t>(static_cast<float>(under) + (static_cast<float>(over) - under) * alpha + 0.5f);
}

at::Tensor checked_image(const at::Tensor& rgb) {
  if (!rgb.defined() || rgb.scalar_type() != at::kByte || rgb.dim() != 3 || rgb.size(2) != 3) {
    throw std::invalid_argument("Canvas: expected a uint8 [H, W, 3] image");
  }
  return rgb.cpu().contiguous();
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb background) : width_(width), height_(height) {
  if (width < 1 || height < 1 || width > 16384 || height > 16384) {
    throw std::invalid_argument("Canvas: " + std::to_string(width) + "x" + std::to_string(height) +
                                " is outside 1..16384 pixels a side");
  }
  pixels_.resize(static_cast<size_t>(width) * height * 3);
  fill_rect(0, 0, width, height, background);
}

Rgb Canvas::pixel(int x, int y) const {
  const uint8_t* p = &pixels_.at((static_cast<size_t>(y) * width_ + x) * 3);
  return {p[0], p[1], p[2]};
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb colour) {
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(width_, x + w), y1 = std::min(height_, y + h);
  for (int yy = y0; yy < y1; ++yy) {
    for (int xx = x0; xx < x1; ++xx) {
      uint8_t* p = at(xx, yy);
      p[0] = colour.r, p[1] = colour.g, p[2] = colour.b;
    }
  }
}

void Canvas::blend_pixel(int x, int y, Rgb colour, float alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || alpha <= 0.0f) return;
  alpha = std::min(alpha, 1.0f);
  uint8_t* p = at(x, y);
  p[0] = mix(p[0], colour.r, alpha), p[1] = mix(p[1], colour.g, alpha), p[2] = mix(p[2], colour.b, alpha);
}

void Canvas::draw_image(const at::Tensor& rgb, int x, int y, int scale) { blend_image(rgb, x, y, scale, 1.0f); }

void Canvas::blend_image(const at::Tensor& rgb, int x, int y, int scale, float alpha) {
  const at::Tensor image = checked_image(rgb);
  const int h = static_cast<int>(image.size(0)), w = static_cast<int>(image.size(1));
  const uint8_t* src = image.data_ptr<uint8_t>();
  for (int sy = 0; sy < h; ++sy) {
    for (int sx = 0; sx < w; ++sx) {
      const uint8_t* s = src + (static_cast<size_t>(sy) * w + sx) * 3;
      const Rgb colour{s[0], s[1], s[2]};
      for (int dy = 0; dy < scale; ++dy) {
        for (int dx = 0; dx < scale; ++dx) blend_pixel(x + sx * scale + dx, y + sy * scale + dy, colour, alpha);
      }
    }
  }
}

at::Tensor Canvas::to_tensor() const {
  at::Tensor out = at::empty({height_, width_, 3}, at::kByte);
  std::copy(pixels_.begin(), pixels_.end(), out.data_ptr<uint8_t>());
  return out;
}

}  // namespace sjd::io
