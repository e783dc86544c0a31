#include "sampling/philox.h"

namespace sjd::sampling {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

}  // namespace

std::array<uint32_t, 4> philox_block(const RngKey& key, uint32_t block) {
  // Counter: (block, position, step, sub << 8 | purpose ^ sequence << 16).
  // Key: the 64-bit seed. Ten rounds, as in Salmon et al. (SC'11).
  std::array<uint32_t, 4> c = {block, key.position, key.step,
                               (key.sequence << 16) ^ (key.sub << 8) ^ static_cast<uint32_t>(key.purpose)};
  uint32_t k0 = static_cast<uint32_t>(key.seed);
  uint32_t k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

namespace {
// 32 random bits -> (0, 1): centre of one of 2^32 equal cells, so log() is finite.
inline double to_open_unit(uint32_t bits) { return (static_cast<double>(bits) + 0.5) * (1.0 / 4294967296.0); }
}  // namespace

double uniform01(const RngKey& key, uint32_t index) {
  return to_open_unit(philox_block(key, index / 4)[index % 4]);
}

void fill_uniform01(const RngKey& key, double* out, int64_t n) {
  for (int64_t block = 0; block * 4 < n; ++block) {
    const auto words = philox_block(key, static_cast<uint32_t>(block));
    for (int64_t j = 0; j < 4 && block * 4 + j < n; ++j) out[block * 4 + j] = to_open_unit(words[j]);
  }
}

}  // namespace sjd::sampling
