#pragma once
// Philox4x32-10 for device code, bit-identical to the CPU reference in
// sampling/philox.cpp: the same counter layout, key and uniform mapping, so a
// kernel and the CPU draw the same number for the same (seed, sequence, step,
// position, purpose, sub, index). Plain C++ when not compiled by nvcc, so the
// host tests check it against the reference.
#include <cstdint>

#ifdef __CUDACC__
#define SJD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SJD_HOST_DEVICE inline
#endif

namespace sjd::kernels {

// The purposes of sampling::Purpose, as the numbers that enter the counter.
enum PhiloxPurpose : uint32_t {
  kPurposeSample = 1,
  kPurposeAccept = 2,
  kPurposeResidual = 3,
  kPurposeInit = 4,
  kPurposeGumbel = 5,
  kPurposeCandidates = 6,
  kPurposeJacobi = 7,
};

// A stream address: everything of sampling::RngKey. Kernels build it from the
// step's fields and the position or slot they work on.
struct PhiloxStream {
  uint64_t seed;
  uint32_t sequence;
  uint32_t step;
  uint32_t position;
  uint32_t purpose;
  uint32_t sub;
};

struct PhiloxWords {
  uint32_t w[4];
};

SJD_HOST_DEVICE PhiloxWords philox_block(const PhiloxStream& s, uint32_t block) {
  // Counter (block, position, step, sequence << 16 ^ sub << 8 ^ purpose); key = seed.
  uint32_t c0 = block, c1 = s.position, c2 = s.step, c3 = (s.sequence << 16) ^ (s.sub << 8) ^ s.purpose;
  uint32_t k0 = static_cast<uint32_t>(s.seed);
  uint32_t k1 = static_cast<uint32_t>(s.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// 32 random bits -> the centre of one of 2^32 equal cells of (0, 1); exact in
// double on both sides, so comparisons against it decide identically.
SJD_HOST_DEVICE double philox_open_unit(uint32_t bits) {
  return (static_cast<double>(bits) + 0.5) * (1.0 / 4294967296.0);
}

SJD_HOST_DEVICE double philox_uniform(const PhiloxStream& s, uint32_t index) {
  return philox_open_unit(philox_block(s, index / 4).w[index % 4]);
}

}  // namespace sjd::kernels
