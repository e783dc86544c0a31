#pragma once
// The colours and text sizes the figures share (compare grid and charts, heatmap legend).
#include "io/canvas.h"

namespace sjd::engine::style {

inline constexpr io::Rgb kBackground{255, 255, 255};
inline constexpr io::Rgb kText{25, 25, 25};
inline constexpr io::Rgb kMuted{105, 105, 105};
inline constexpr io::Rgb kRule{200, 200, 200};
inline constexpr io::Rgb kLossy{200, 40, 40};        // LOSSY labels
inline constexpr io::Rgb kCompression{150, 180, 220};  // step compression bars
inline constexpr io::Rgb kSpeedup{40, 85, 165};        // wall-clock speed-up bars
inline constexpr io::Rgb kSpeedupLossy{225, 125, 30};  // a lossy method's speed-up bar

inline constexpr int kTitleSize = 20;
inline constexpr int kHeaderSize = 15;
inline constexpr int kLabelSize = 13;
inline constexpr int kSmallSize = 11;

}  // namespace sjd::engine::style
