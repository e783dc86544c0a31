#pragma once
// The pieces of top-k by radix selection that do not depend on the block:
// an order-preserving map of floats to unsigned keys and the choice of the
// digit holding the k-th largest key from one pass's 256-bin histogram. The
// pipeline kernel runs four 8-bit passes with them; the host tests drive the
// same pieces sequentially against std::nth_element.
#include <cstdint>
#include <cstring>

#include "kernels/philox.cuh"  // SJD_HOST_DEVICE

namespace sjd::kernels {

// a > b as floats (no NaN) iff order_key(a) > order_key(b); -0 and +0 differ by one.
SJD_HOST_DEVICE uint32_t order_key(float x) {
#ifdef __CUDA_ARCH__
  const uint32_t bits = __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

SJD_HOST_DEVICE float from_order_key(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// The bin (scanning from 255 down) where the `*remaining`-th largest of the
// counted keys falls; `*remaining` becomes its rank within that bin.
SJD_HOST_DEVICE int select_digit(const uint32_t* histogram, int64_t* remaining) {
  int64_t above = 0;
  for (int b = 255; b > 0; --b) {
    if (above + histogram[b] >= *remaining) {
      *remaining -= above;
      return b;
    }
    above += histogram[b];
  }
  *remaining -= above;
  return 0;
}

}  // namespace sjd::kernels
