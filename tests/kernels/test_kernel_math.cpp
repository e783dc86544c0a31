// The arithmetic the CUDA kernels share with the host (kernels/philox.cuh,
// kernels/verify_math.cuh), compiled here as plain C++ and checked bit for bit
// against the CPU reference it must mirror (or, for top-k, against
// std::nth_element). The kernels' parallel structure is checked on the device
// machine by tests/cuda.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/philox.cuh"
#include "kernels/radix_select.cuh"
#include "kernels/verify_math.cuh"
#include "sampling/categorical.h"
#include "sampling/philox.h"
#include "sampling/rejection.h"
#include "sampling/relaxation.h"

using namespace sjd;

namespace {

sampling::RngKey reference_key(uint64_t seed, uint32_t sequence, uint32_t step, uint32_t position,
                               sampling::Purpose purpose, uint32_t sub) {
  sampling::RngKey k;
  k.seed = seed;
  k.sequence = sequence;
  k.step = step;
  k.position = position;
  k.purpose = purpose;
  k.sub = sub;
  return k;
}

kernels::PhiloxStream device_key(const sampling::RngKey& k) {
  return {k.seed, k.sequence, k.step, k.position, static_cast<uint32_t>(k.purpose), k.sub};
}

// A probability row with exact zeros, a dominant token and a long tail.
std::vector<float> random_row(int64_t n, uint64_t seed, double zero_share) {
  at::Tensor logits = at::randn({n}, at::make_generator<at::CPUGeneratorImpl>(seed)) * 2.0;
  at::Tensor u = at::rand({n}, at::make_generator<at::CPUGeneratorImpl>(seed + 1));
  logits.masked_fill_(u < zero_share, -INFINITY);
  const at::Tensor p = at::softmax(logits, 0).contiguous();
  return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + n);
}

// Every relaxation the kernels accept, with the reference settings and the
// kernel arguments that describe the same thing.
struct RelaxCase {
  sampling::Relaxation reference;
  kernels::RelaxArgs device;
};

std::vector<RelaxCase> relax_cases(int64_t vocab) {
  std::vector<RelaxCase> cases;
  for (auto kind : {sampling::RelaxKind::kNone, sampling::RelaxKind::kUniform, sampling::RelaxKind::kCool,
                    sampling::RelaxKind::kLantern}) {
    for (bool own : {false, true}) {
      if (own && kind != sampling::RelaxKind::kLantern) continue;
      RelaxCase c;
      c.reference.kind = kind;
      c.reference.delta = 1.3;
      c.reference.lantern_k = 5;
      c.reference.lantern_lambda = 1.5;
      c.reference.lantern_own_residual = own;
      c.device.kind = kind == sampling::RelaxKind::kNone      ? kernels::kRelaxNone
                      : kind == sampling::RelaxKind::kUniform ? kernels::kRelaxUniform
                      : kind == sampling::RelaxKind::kCool    ? kernels::kRelaxCool
                                                              : kernels::kRelaxLantern;
      c.device.lantern_k = 5;
      c.device.lantern_lambda = 1.5;
      c.device.lantern_own_residual = own;
      if (kind == sampling::RelaxKind::kLantern) {
        // Neighbours: a random permutation's next tokens (any table works for the arithmetic).
        const at::Tensor order = at::randperm(vocab, at::make_generator<at::CPUGeneratorImpl>(5));
        at::Tensor table = at::empty({vocab, 6}, at::kLong);
        for (int64_t j = 0; j < 6; ++j) table.select(1, j).copy_(order.roll(j + 1));
        table[3].fill_(-1);  // a token without neighbours
        c.reference.neighbours = table;
        c.device.neighbours = c.reference.neighbours.data_ptr<int64_t>();
        c.device.neighbour_rows = vocab;
        c.device.neighbour_cols = 6;
      }
      cases.push_back(c);
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("device Philox equals the CPU reference word for word", "[kernels]") {
  for (uint64_t seed : {0ull, 7ull, 0x123456789ABCDEFull, ~0ull}) {
    for (uint32_t step : {0u, 3u, 4000000000u}) {
      for (auto purpose : {sampling::Purpose::kSample, sampling::Purpose::kResidual, sampling::Purpose::kJacobi}) {
        const auto ref = reference_key(seed, 2, step, 1234, purpose, 3);
        for (uint32_t block : {0u, 1u, 77u, 0xFFFFFFFFu}) {
          const auto expected = sampling::philox_block(ref, block);
          const auto got = kernels::philox_block(device_key(ref), block);
          for (int j = 0; j < 4; ++j) REQUIRE(got.w[j] == expected[static_cast<size_t>(j)]);
        }
        for (uint32_t index : {0u, 1u, 2u, 3u, 4u, 65535u}) {
          REQUIRE(kernels::philox_uniform(device_key(ref), index) == sampling::uniform01(ref, index));
        }
      }
    }
  }
}

TEST_CASE("device race scores pick the reference's sample", "[kernels]") {
  const int64_t n = 1001;  // not a multiple of 4: the last Philox block is partial
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> p = random_row(n, seed, 0.3);
    const auto key = reference_key(seed, 0, 1, 9, sampling::Purpose::kSample, 0);
    // The kernels' race visits Philox blocks in any order; the winner is the
    // highest score, the lowest index among ties.
    int64_t best = -1;
    double best_score = -1.0;
    for (int64_t v = 0; v < n; ++v) {
      if (!(p[static_cast<size_t>(v)] > 0.0f)) continue;
      const uint32_t bits = kernels::philox_block(device_key(key), static_cast<uint32_t>(v / 4)).w[v % 4];
      const double score = kernels::race_score(p[static_cast<size_t>(v)], bits);
      if (score > best_score) {
        best_score = score;
        best = v;
      }
    }
    CHECK(best == sampling::sample_race(p.data(), n, key));
  }
}

TEST_CASE("device relaxed scores, acceptance and residual weights equal the reference's", "[kernels]") {
  const int64_t n = 257;
  const std::vector<float> p = random_row(n, 11, 0.2);
  const std::vector<float> q = random_row(n, 12, 0.2);
  for (const RelaxCase& c : relax_cases(n)) {
    INFO("relax " << sampling::relax_kind_name(c.reference.kind) << " own " << c.reference.lantern_own_residual);
    for (int64_t draft : {int64_t{0}, int64_t{3}, int64_t{17}, int64_t{200}}) {
      const double weight = sampling::relaxation_weight(c.reference, 2, 8);
      const double score = kernels::relaxed_score(c.device, p.data(), draft, weight);
      REQUIRE(score == sampling::relaxed_score(c.reference, p.data(), draft, weight));

      // The accept decision of verify_draft, for many accept streams.
      std::vector<float> scratch(static_cast<size_t>(n));
      for (uint32_t step = 0; step < 50; ++step) {
        const sampling::VerifyKeys keys{reference_key(1, 0, step, 5, sampling::Purpose::kAccept, 0),
                                        reference_key(1, 0, step, 5, sampling::Purpose::kResidual, 0)};
        const auto verdict =
            sampling::verify_draft(p.data(), q.data(), n, draft, c.reference, weight, keys, scratch.data());
        const bool accepted = kernels::accept_draft(score, q[static_cast<size_t>(draft)],
                                                    kernels::philox_uniform(device_key(keys.accept), 0));
        REQUIRE(accepted == verdict.accepted);
      }

      std::vector<float> expected(static_cast<size_t>(n));
      sampling::relaxed_residual(c.reference, p.data(), q.data(), n, draft, weight, expected.data());
      kernels::DraftNeighbourhood own{};
      own.draft = draft;
      if (c.device.kind == kernels::kRelaxLantern && c.device.lantern_own_residual) {
        own.count = kernels::lantern_extras(c.device, p.data(), draft, own.extra, &own.mass);
      }
      for (int64_t v = 0; v < n; ++v) {
        REQUIRE(kernels::residual_weight(c.device, p.data(), q[static_cast<size_t>(v)], v, weight, own) ==
                expected[static_cast<size_t>(v)]);
      }
    }
  }
}

namespace {

// The pipeline kernel's radix selection with the block replaced by a loop:
// four 8-bit passes over the keys, each narrowing the prefix of the k-th largest.
float kth_largest_by_radix(const std::vector<float>& x, int64_t k) {
  uint32_t prefix = 0, mask = 0;
  int64_t remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    uint32_t histogram[256] = {};
    for (float v : x) {
      const uint32_t key = kernels::order_key(v);
      if ((key & mask) == prefix) ++histogram[(key >> shift) & 0xFFu];
    }
    prefix |= static_cast<uint32_t>(kernels::select_digit(histogram, &remaining)) << shift;
    mask |= 0xFFu << shift;
  }
  return kernels::from_order_key(prefix);
}

}  // namespace

TEST_CASE("radix-select keys keep float order and find the k-th largest exactly", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ordered = {-inf, -3.4e38f, -2.0f, -1e-40f, 0.0f, 1e-45f, 1.0f, 1.0000001f, 3.4e38f, inf};
  for (size_t i = 0; i + 1 < ordered.size(); ++i) {
    CHECK(kernels::order_key(ordered[i]) < kernels::order_key(ordered[i + 1]));
    CHECK(kernels::from_order_key(kernels::order_key(ordered[i])) == ordered[i]);
  }
  // Random rows with many ties and masked (-inf) entries, every k.
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const int64_t n = 300 + static_cast<int64_t>(seed) * 37;
    at::Tensor t = at::floor(at::randn({n}, at::make_generator<at::CPUGeneratorImpl>(seed)) * 3.0);
    t.masked_fill_(at::rand({n}, at::make_generator<at::CPUGeneratorImpl>(seed + 50)) < 0.3, -inf);
    const std::vector<float> x(t.data_ptr<float>(), t.data_ptr<float>() + n);
    for (int64_t k = 1; k <= n; k += 7) {
      std::vector<float> sorted = x;
      std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
      REQUIRE(kth_largest_by_radix(x, k) == sorted[static_cast<size_t>(k - 1)]);
    }
  }
}

TEST_CASE("LANTERN's neighbourhood mass is summed in the reference's order", "[kernels]") {
  // p(x) = 1 and two neighbours of 2^-53 each: summed p(x) first, as the reference does, each
  // addition rounds back to 1; the neighbours summed first would give 1 + 2^-52.
  const int64_t n = 8;
  std::vector<float> p(static_cast<size_t>(n), 0.0f);
  p[0] = 1.0f;
  p[1] = p[2] = std::ldexp(1.0f, -53);
  sampling::Relaxation reference;
  reference.kind = sampling::RelaxKind::kLantern;
  reference.lantern_k = 2;
  reference.lantern_lambda = 4.0;
  reference.neighbours = at::tensor(std::vector<int64_t>(static_cast<size_t>(n * 2), -1)).view({n, 2});
  reference.neighbours[0][0] = 1;
  reference.neighbours[0][1] = 2;
  kernels::RelaxArgs device;
  device.kind = kernels::kRelaxLantern;
  device.lantern_k = 2;
  device.lantern_lambda = 4.0;
  device.neighbours = reference.neighbours.data_ptr<int64_t>();
  device.neighbour_rows = n;
  device.neighbour_cols = 2;
  const double expected = sampling::relaxed_score(reference, p.data(), 0, 1.0);
  CHECK(expected == 1.0);
  CHECK(kernels::relaxed_score(device, p.data(), 0, 1.0) == expected);
}

TEST_CASE("a certain token scores at least 1 on the device as in the reference, whatever the weight", "[kernels]") {
  const int64_t n = 16;
  std::vector<float> point(static_cast<size_t>(n), 0.0f);
  point[5] = 1.0f;
  for (const RelaxCase& c : relax_cases(n)) {
    INFO("relax " << sampling::relax_kind_name(c.reference.kind));
    for (const double weight : {0.04, 0.5, 1.0, 2.0}) {
      const double expected = sampling::relaxed_score(c.reference, point.data(), 5, weight);
      CHECK(expected == std::max(1.0, c.reference.kind == sampling::RelaxKind::kLantern ? 1.0 : weight));
      CHECK(kernels::relaxed_score(c.device, point.data(), 5, weight) == expected);
    }
  }
}
