// The verification primitives against their exact output distributions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "sampling/categorical.h"
#include "sampling/rejection.h"
#include "testing/statistics.h"

using namespace sjd::sampling;

namespace {

RngKey key_of(uint64_t seed, Purpose purpose, uint32_t step = 0) {
  RngKey k;
  k.seed = seed;
  k.step = step;
  k.purpose = purpose;
  return k;
}

std::map<int64_t, double> as_map(const std::vector<float>& p) {
  std::map<int64_t, double> m;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0) m[static_cast<int64_t>(i)] = p[i];
  }
  return m;
}

// Output histogram of MRS when the draft is drawn from q.
std::map<int64_t, long> run_mrs(const std::vector<float>& p, const std::vector<float>& q, int draws,
                                const Relaxation& relax = {}, double weight = 1.0) {
  std::map<int64_t, long> counts;
  std::vector<float> scratch(p.size());
  for (int i = 0; i < draws; ++i) {
    const int64_t x = sample_race(q.data(), static_cast<int64_t>(q.size()), key_of(i, Purpose::kInit));
    const VerifyKeys keys{key_of(i, Purpose::kAccept), key_of(i, Purpose::kResidual)};
    const auto out = verify_draft(p.data(), q.data(), static_cast<int64_t>(p.size()), x, relax, weight, keys,
                                  scratch.data());
    ++counts[out.token];
  }
  return counts;
}

// 60000 draws of K candidates without replacement from q, each verified against p; their fit to p.
sjd::testing::FitResult candidates_fit(const std::vector<float>& p, const std::vector<float>& q, int candidates,
                                       Mutant mutant) {
  const auto n = static_cast<int64_t>(p.size());
  std::map<int64_t, long> counts;
  for (int i = 0; i < 60000; ++i) {
    const auto c = draw_without_replacement(q.data(), n, candidates, key_of(i, Purpose::kCandidates));
    const auto out = verify_candidates(p.data(), q.data(), n, c, {}, 1.0,
                                       {key_of(i, Purpose::kAccept), key_of(i, Purpose::kResidual)}, mutant);
    ++counts[out.token];
  }
  return sjd::testing::chi_square_fit(as_map(p), counts);
}

}  // namespace

TEST_CASE("Philox4x32-10 gives the published known-answer blocks", "[sampling]") {
  // Random123's kat_vectors for philox4x32_10: counter words (c0..c3), key words (k0, k1), result. Our
  // counter is (block, position, step, sequence << 16 ^ sub << 8 ^ purpose) and the key the seed's halves.
  struct Vector {
    uint32_t block, position, step, sequence, sub, purpose, k0, k1;
    std::array<uint32_t, 4> expected;
  };
  const Vector vectors[] = {
      {0, 0, 0, 0, 0, 0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffu, 0xffu, 0xffu, 0xffffffffu, 0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x0370u, 0x73u, 0x44u, 0xa4093822u, 0x299f31d0u,  // digits of pi
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Vector& v : vectors) {
    RngKey key;
    key.seed = static_cast<uint64_t>(v.k1) << 32 | v.k0;
    key.position = v.position;
    key.step = v.step;
    key.sequence = v.sequence;
    key.sub = v.sub;
    key.purpose = static_cast<Purpose>(v.purpose);
    CHECK(philox_block(key, v.block) == v.expected);
  }
}

TEST_CASE("Philox draws are reproducible and separated by every key field", "[sampling]") {
  RngKey a = key_of(7, Purpose::kSample);
  CHECK(uniform01(a, 3) == uniform01(RngKey(a), 3));  // no state: the same key gives the same number again
  RngKey b = a;
  b.position = 1;
  RngKey c = a;
  c.purpose = Purpose::kAccept;
  RngKey d = a;
  d.step = 1;
  RngKey e = a;
  e.sequence = 1;
  RngKey f = a;
  f.sub = 1;
  for (const RngKey& other : {b, c, d, e, f}) CHECK(uniform01(a, 0) != uniform01(other, 0));
  double sum = 0;
  std::vector<double> u(100000);
  fill_uniform01(a, u.data(), static_cast<int64_t>(u.size()));
  for (double x : u) {
    REQUIRE(x > 0.0);
    REQUIRE(x < 1.0);
    sum += x;
  }
  CHECK(std::abs(sum / u.size() - 0.5) < 0.005);
}

// The statistical tests below fix their seeds (the keys' seeds 0..N-1) and pass a correct sampler at
// p > 1e-3; each keeps a broken variant that the same test, on the same keys, rejects at p < 1e-6.

TEST_CASE("exponential race samples p (chi-square, fixed seeds, p > 1e-3)", "[sampling]") {
  const std::vector<float> p = {0.05f, 0.3f, 0.0f, 0.15f, 0.5f};
  std::map<int64_t, long> counts, broken;
  for (int i = 0; i < 50000; ++i) {
    const RngKey key = key_of(i, Purpose::kSample);
    ++counts[sample_race(p.data(), 5, key)];
    // Broken: the largest p_i * u_i, a race whose scores are not exponential.
    int64_t best = 0;
    for (int64_t t = 1; t < 5; ++t) {
      if (p[t] * uniform01(key, static_cast<uint32_t>(t)) > p[best] * uniform01(key, static_cast<uint32_t>(best))) best = t;
    }
    ++broken[best];
  }
  CHECK(counts.count(2) == 0);
  const auto fit = sjd::testing::chi_square_fit(as_map(p), counts);
  INFO("chi2 " << fit.chi_square << " p " << fit.p_value);
  CHECK(fit.p_value > 1e-3);
  CHECK(sjd::testing::chi_square_fit(as_map(p), broken).p_value < 1e-6);
  const std::vector<float> zero(4, 0.0f);
  CHECK(sample_race(zero.data(), 4, key_of(1, Purpose::kSample)) == -1);
}

TEST_CASE("sample_token never gives -1: all-NaN or all-zero weights are an error", "[sampling][robustness]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& w : {std::vector<float>(4, nan), std::vector<float>(4, 0.0f)}) {
    CHECK_THROWS_AS(sample_token(w.data(), 4, key_of(1, Purpose::kSample)), std::runtime_error);
  }
  const std::vector<float> one = {0.0f, nan, 0.7f, 0.0f};
  CHECK(sample_token(one.data(), 4, key_of(1, Purpose::kSample)) == 2);
}

TEST_CASE("draws without replacement have the sequential law", "[sampling]") {
  const std::vector<float> q = {0.1f, 0.2f, 0.3f, 0.4f};
  std::map<std::pair<int64_t, int64_t>, double> exact;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) exact[{a, b}] = q[a] * q[b] / (1.0 - q[a]);
    }
  }
  std::map<std::pair<int64_t, int64_t>, long> counts, broken;
  for (int i = 0; i < 40000; ++i) {
    const auto d = draw_without_replacement(q.data(), 4, 2, key_of(i, Purpose::kCandidates));
    REQUIRE(d.size() == 2);
    ++counts[{d[0], d[1]}];
    // Broken: pairs of independent draws from q until the two differ, the law q_a q_b / (1 - sum q^2) (redrawing
    // only the second would be the sequential law itself).
    int64_t a = 0, b = 0;
    for (uint32_t attempt = 1; a == b; attempt += 2) {
      a = sample_race(q.data(), 4, key_of(i, Purpose::kCandidates, attempt));
      b = sample_race(q.data(), 4, key_of(i, Purpose::kCandidates, attempt + 1));
    }
    ++broken[{a, b}];
  }
  const auto fit = sjd::testing::chi_square_fit(exact, counts);
  INFO("p " << fit.p_value);
  CHECK(fit.p_value > 1e-3);
  CHECK(sjd::testing::chi_square_fit(exact, broken).p_value < 1e-6);
  const std::vector<float> two = {0.5f, 0.0f, 0.5f, 0.0f};
  CHECK(draw_without_replacement(two.data(), 4, 3, key_of(0, Purpose::kCandidates)).size() == 2);
}

TEST_CASE("MRS output is distributed as p", "[sampling]") {
  const std::vector<float> p = {0.1f, 0.6f, 0.2f, 0.1f};
  const std::vector<float> q = {0.4f, 0.1f, 0.1f, 0.4f};
  const auto fit = sjd::testing::chi_square_fit(as_map(p), run_mrs(p, q, 60000));
  INFO("p " << fit.p_value);
  CHECK(fit.p_value > 1e-3);
  // Broken: a rejected draft replaced by a draw from p itself instead of the residual max(p - q, 0).
  std::map<int64_t, long> broken;
  for (int i = 0; i < 60000; ++i) {
    const int64_t x = sample_race(q.data(), 4, key_of(i, Purpose::kInit));
    const bool accept = uniform01(key_of(i, Purpose::kAccept), 0) < std::min(1.0, double{p[x]} / q[x]);
    ++broken[accept ? x : sample_race(p.data(), 4, key_of(i, Purpose::kResidual))];
  }
  CHECK(sjd::testing::chi_square_fit(as_map(p), broken).p_value < 1e-6);
}

TEST_CASE("MRS edge cases: p == q, point-mass q, top-k excluding the draft", "[sampling]") {
  const std::vector<float> p = {0.25f, 0.25f, 0.5f};
  std::vector<float> scratch(3);
  // p == q: the residual is zero; every draft is accepted, never NaN.
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = sample_race(p.data(), 3, key_of(i, Purpose::kInit));
    const auto out = verify_draft(p.data(), p.data(), 3, x, {}, 1.0, {key_of(i, Purpose::kAccept), key_of(i, Purpose::kResidual)},
                                  scratch.data());
    REQUIRE(out.accepted);
    REQUIRE(out.token == x);
  }
  // The draft's p is 0 (cut by top-k): it is always rejected and the output is still p.
  const std::vector<float> cut = {0.0f, 0.4f, 0.6f};
  const std::vector<float> point = {1.0f, 0.0f, 0.0f};
  const auto counts = run_mrs(cut, point, 30000);
  CHECK(counts.count(0) == 0);
  const auto fit = sjd::testing::chi_square_fit(as_map(cut), counts);
  CHECK(fit.p_value > 1e-3);
}

TEST_CASE("multi-candidate verification without replacement is exact, skipping renormalisation is not",
          "[sampling]") {
  const std::vector<float> p = {0.05f, 0.1f, 0.45f, 0.3f, 0.1f};
  const std::vector<float> q = {0.3f, 0.3f, 0.05f, 0.05f, 0.3f};
  const auto good = candidates_fit(p, q, 3, Mutant::kNone);
  const auto broken = candidates_fit(p, q, 3, Mutant::kSkipResidualRenormalisation);
  INFO("exact p " << good.p_value << ", mutant p " << broken.p_value << " TV " << broken.total_variation);
  CHECK(good.p_value > 1e-3);
  CHECK(broken.p_value < 1e-6);
}

TEST_CASE("multi-candidate verification stays exact when q's row does not sum to exactly 1 and the first "
          "candidate holds nearly all of it", "[sampling]") {
  // A float32 softmax row sums to 1 only within ~1e-6 (measured 1 - 5.5e-7 to 1 + 7e-6 at 8192 codes). After a
  // candidate holding 0.99997 of q is rejected, 1 - q(c_1) is that error away from the 3e-5 the row has left:
  // q^(2) taken from it is 7% off here, and the output's total variation from p is 3% (computed exactly).
  const std::vector<float> p = {0.06f, 0.5f, 0.3f, 0.14f};
  std::vector<float> q = {0.99997f, 1e-5f, 1e-5f, 1e-5f};
  for (float& x : q) x *= 1.000002f;  // sums to 1 + 2.05e-6, the size of a softmax row's rounding
  const auto good = candidates_fit(p, q, 2, Mutant::kNone);
  const auto broken = candidates_fit(p, q, 2, Mutant::kAssumeUnitDraftMass);
  INFO("exact p " << good.p_value << ", mutant p " << broken.p_value << " TV " << broken.total_variation);
  CHECK(good.p_value > 1e-3);
  CHECK(broken.p_value < 1e-6);
}

TEST_CASE("relaxed acceptance: exact at delta = 1, bias grows with delta", "[sampling][lossy]") {
  // The exact output law of one relaxed MRS: P(y) = q(y) f(y) + (1 - sum q f) G*(y).
  const std::vector<float> p = {0.05f, 0.15f, 0.5f, 0.3f};
  const std::vector<float> q = {0.4f, 0.3f, 0.1f, 0.2f};
  auto tv_for = [&](double delta) {
    Relaxation relax;
    relax.kind = RelaxKind::kUniform;
    relax.delta = delta;
    const double w = relaxation_weight(relax, 1, 1);
    std::vector<double> out(4, 0.0);
    std::vector<float> residual(4);
    double accepted = 0.0;
    for (int y = 0; y < 4; ++y) {
      const double f = std::min(1.0, relaxed_score(relax, p.data(), y, w) / q[y]);
      out[y] += q[y] * f;
      accepted += q[y] * f;
    }
    relaxed_residual(relax, p.data(), q.data(), 4, 0, w, residual.data());
    double mass = 0;
    for (float r : residual) mass += r;
    double tv = 0.0;
    for (int y = 0; y < 4; ++y) tv += std::abs(out[y] + (1.0 - accepted) * (mass > 0 ? residual[y] / mass : 0.0) - p[y]);
    return tv / 2.0;
  };
  CHECK(tv_for(1.0) < 1e-7);
  CHECK(tv_for(1.5) > 1e-3);
  CHECK(tv_for(3.0) > tv_for(1.5));
  CHECK(tv_for(10.0) >= tv_for(3.0));
  // Sampled check of the same law: delta 1 passes the exactness test.
  Relaxation none;
  none.kind = RelaxKind::kUniform;
  none.delta = 1.0;
  CHECK(sjd::testing::chi_square_fit(as_map(p), run_mrs(p, q, 40000, none, 1.0)).p_value > 1e-3);
  // The same sampled fit sees a lossy setting (the broken variant): delta 3 is rejected at p < 1e-6.
  Relaxation loose = none;
  loose.delta = 3.0;
  const auto lossy =
      sjd::testing::chi_square_fit(as_map(p), run_mrs(p, q, 40000, loose, relaxation_weight(loose, 1, 1)));
  INFO("delta 3: TV " << lossy.total_variation << ", p " << lossy.p_value);
  CHECK(lossy.p_value < 1e-6);
}

TEST_CASE("relaxed MRS draws its closed-form law: lossy above weight 1, exact at or below it", "[sampling][lossy]") {
  // P(y) = q(y) f(y) + (1 - sum q f) G*(y), f = min(1, w p / q), G* = Norm(max(p - q f, 0)) (Li et al.).
  // Below weight 1 (Cool-SD's late positions) p - q f is never negative, so P = p: stricter, not lossy.
  const std::vector<float> p = {0.05f, 0.15f, 0.5f, 0.3f};
  const std::vector<float> q = {0.4f, 0.3f, 0.1f, 0.2f};
  const auto law = [&](double w) {
    std::map<int64_t, double> out;
    double accepted = 0.0, mass = 0.0;
    std::vector<double> residual(4);
    for (int y = 0; y < 4; ++y) {
      const double qf = std::min<double>(q[y], w * p[y]);
      out[y] = qf;
      accepted += qf;
      residual[static_cast<size_t>(y)] = std::max<double>(p[y] - qf, 0.0);
      mass += residual[static_cast<size_t>(y)];
    }
    for (int y = 0; y < 4; ++y) out[y] += (1.0 - accepted) * residual[static_cast<size_t>(y)] / mass;
    return out;
  };
  const auto tv_from_p = [&](const std::map<int64_t, double>& m) {
    double tv = 0.0;
    for (int y = 0; y < 4; ++y) tv += std::abs(m.at(y) - p[static_cast<size_t>(y)]);
    return tv / 2.0;
  };
  for (const double w : {2.0, 0.4}) {
    Relaxation relax;
    relax.kind = w > 1.0 ? RelaxKind::kUniform : RelaxKind::kCool;
    const auto fit = sjd::testing::chi_square_fit(law(w), run_mrs(p, q, 40000, relax, w));
    INFO("weight " << w << ": p " << fit.p_value << " TV " << fit.total_variation);
    CHECK(fit.p_value > 1e-3);
    if (w > 1.0) {
      CHECK(tv_from_p(law(w)) > 0.05);
    } else {
      CHECK(tv_from_p(law(w)) < 1e-7);
    }
  }
  // Broken variant: the relaxed acceptance with the lossless residual max(p - q, 0) instead of G*. At weight
  // 1 or more the two are the same; below 1 the lossless residual misses the p - w p that q > p tokens keep.
  Relaxation cool;
  cool.kind = RelaxKind::kCool;
  std::map<int64_t, long> broken;
  std::vector<float> residual(4);
  for (int i = 0; i < 40000; ++i) {
    const int64_t x = sample_race(q.data(), 4, key_of(i, Purpose::kInit));
    const double score = relaxed_score(cool, p.data(), x, 0.4);
    if (uniform01(key_of(i, Purpose::kAccept), 0) * q[static_cast<size_t>(x)] < score) {
      ++broken[x];
      continue;
    }
    relaxed_residual(Relaxation{}, p.data(), q.data(), 4, x, 1.0, residual.data());
    ++broken[sample_token(residual.data(), 4, key_of(i, Purpose::kResidual))];
  }
  const auto rejected = sjd::testing::chi_square_fit(law(0.4), broken);
  INFO("lossless residual under weight 0.4: p " << rejected.p_value << " TV " << rejected.total_variation);
  CHECK(rejected.p_value < 1e-6);
}

TEST_CASE("Cool-SD weights average to delta and decay along the window", "[sampling][lossy]") {
  Relaxation cool;
  cool.kind = RelaxKind::kCool;
  cool.delta = 2.0;
  cool.nu = 0.7;
  double sum = 0.0;
  for (int i = 1; i <= 8; ++i) {
    sum += relaxation_weight(cool, i, 8);
    if (i > 1) CHECK(relaxation_weight(cool, i, 8) < relaxation_weight(cool, i - 1, 8));
  }
  CHECK(sum == Approx(2.0 * 8));
  cool.nu = 0.0;
  CHECK(relaxation_weight(cool, 3, 8) == Approx(2.0));
}

TEST_CASE("a certain draft passes under every relaxation, Cool-SD's small late weights included", "[sampling][lossy]") {
  // A forced structure token: p and q are the same point mass. Cool-SD weighs late window
  // positions below 1; scored w * p the token would be "rejected" (and committed by the
  // residual anyway) in about 1 - w of the windows, each stopping there.
  const std::vector<float> point = {0.0f, 0.0f, 1.0f, 0.0f};
  std::vector<float> scratch(point.size());
  for (const RelaxKind kind : {RelaxKind::kNone, RelaxKind::kUniform, RelaxKind::kCool}) {
    Relaxation relax;
    relax.kind = kind;
    relax.delta = 0.5;
    relax.nu = 0.7;
    const double weight = relaxation_weight(relax, 8, 8);  // Cool-SD: about 0.04
    int passed = 0;
    for (uint32_t i = 0; i < 200; ++i) {
      const VerifyKeys keys{key_of(i, Purpose::kAccept), key_of(i, Purpose::kResidual)};
      const auto out = verify_draft(point.data(), point.data(), 4, 2, relax, weight, keys, scratch.data());
      CHECK(out.token == 2);
      passed += out.accepted ? 1 : 0;
    }
    INFO(relax_kind_name(kind) << ", weight " << weight);
    CHECK(passed == 200);
  }
}
