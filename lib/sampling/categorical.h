#pragma once
// Categorical draws on the CPU, the reference that a GPU kernel must match.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "sampling/philox.h"

namespace sjd::sampling {

// Exponential race: argmax_v w[v] / E_v with E_v = -log U_v, U_v from the
// stream `key` at index v. Distributed as w / sum(w) without normalising w, so a
// residual with tiny total mass needs no division. Returns -1 if every w is 0.
int64_t sample_race(const float* w, int64_t n, const RngKey& key);

// sample_race for a token that goes on to the model: throws NonFiniteLogits
// when no weight is positive (every probability NaN or zero -- non-finite
// logits), so -1 is never used as a token id.
int64_t sample_token(const float* w, int64_t n, const RngKey& key);

// The error sample_token throws; the device verifier throws it too when a kernel's
// draw found no positive weight (its tokens come back as -1). With checked settings
// and finite weights it means the weights overflow the model's arithmetic.
class NonFiniteLogits : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
[[noreturn]] void throw_no_positive_probability();

// Greedy choice (lowest index among ties) from probabilities; throws as above if none is positive.
int64_t argmax(const float* p, int64_t n);

// Up to k distinct tokens drawn sequentially without replacement from q (the
// Gumbel-top-k construction, whose order has the law of sequential draws). Fewer
// than k come back when q has fewer than k tokens of positive mass.
std::vector<int64_t> draw_without_replacement(const float* q, int64_t n, int k, const RngKey& key);

}  // namespace sjd::sampling
