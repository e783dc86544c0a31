#pragma once
// Counter-based random numbers (Philox4x32-10). Every draw is addressed by
// (seed, sequence, step, position, purpose, index), so the CPU reference and a
// GPU kernel produce the same numbers for the same draw, in any order, with no
// stored generator state. That is what makes a seed reproduce an image exactly.
#include <array>
#include <cstdint>

namespace sjd::sampling {

// What a random number is used for; part of the counter, so different uses of
// the same (step, position) never share numbers.
enum class Purpose : uint32_t {
  kSample = 1,       // a categorical draw from p (AR, bonus, Jacobi update)
  kAccept = 2,       // the uniform of an acceptance test
  kResidual = 3,     // a categorical draw from a residual distribution
  kInit = 4,         // initialisation of a new draft position
  kGumbel = 5,       // SCD Gumbel-sharing noise (keyed without step)
  kCandidates = 6,   // SJD-PAC candidate draws without replacement
  kJacobi = 7,       // redraw of a kept draft position from its fresh p
};

// The counter packs sequence, sub and purpose into one 32-bit word (sequence << 16 ^ sub << 8 ^
// purpose), so streams are distinct only while sequence < 2^16 and sub < 2^8, or sequence is 0 (a
// tree level's sub reaches pd_k, up to 4096). Every caller today passes sequence 0: the images of a
// batch differ by seed. Giving images sequence numbers would need that word widened first, which
// changes every image a seed makes.
struct RngKey {
  uint64_t seed = 0;
  uint32_t sequence = 0;  // which image of a batch / which seed of a compare run
  uint32_t step = 0;      // target forward pass that the draw belongs to
  uint32_t position = 0;  // absolute generated-token index
  Purpose purpose = Purpose::kSample;
  uint32_t sub = 0;       // sub-stream (e.g. sibling attempt in multi-candidate verification)
};

inline RngKey make_key(uint64_t seed, uint32_t sequence, uint32_t step, int64_t position, Purpose purpose,
                       uint32_t sub = 0) {
  RngKey k;
  k.seed = seed;
  k.sequence = sequence;
  k.step = step;
  k.position = static_cast<uint32_t>(position);
  k.purpose = purpose;
  k.sub = sub;
  return k;
}

// Four 32-bit words for block `block` of the stream addressed by `key`.
std::array<uint32_t, 4> philox_block(const RngKey& key, uint32_t block);

// Uniform in (0, 1) (never exactly 0 or 1) for element `index` of the stream.
double uniform01(const RngKey& key, uint32_t index);

// Fills out[0..n) with uniforms in (0, 1) for indices 0..n-1.
void fill_uniform01(const RngKey& key, double* out, int64_t n);

}  // namespace sjd::sampling
