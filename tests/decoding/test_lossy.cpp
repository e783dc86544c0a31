// Lossy relaxations measured against the exact AR distribution: the total
// variation distance of whole sequences grows with delta and is zero (within
// the exactness test) at delta = 1; relaxing buys fewer steps.
// Significance: every run has fixed seeds, so its verdict is deterministic. An
// exact setting must fit the AR law at p > 1e-3 (Pearson chi-square over whole
// sequences, each case on its own, not corrected for the few cases per test: a
// false alarm would show as a fixed failure, not a flaky one); a lossy setting,
// the broken variant of each test, must be rejected at p < 1e-6.
#include <catch2/catch.hpp>

#include "decoding/decoder.h"
#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "sampling/relaxation.h"
#include "table_model.h"
#include "testing/statistics.h"

using namespace sjd;

namespace {

struct LossyRun {
  sjd::testing::FitResult fit;
  double steps = 0.0;
};

LossyRun run(const std::string& method, sampling::RelaxKind kind, double delta, double nu = 0.7,
             bool lantern_own_residual = false) {
  sjd::testing::TableModel model({});
  const auto layout = sjd::testing::small_layout();
  decoding::DecodeRequest request;
  request.method = decoding::make_method(method);
  request.method.window = 4;
  request.method.pd_k = 3;
  request.method.pd_depth = 2;
  request.method.relax.kind = kind;
  request.method.relax.delta = delta;
  request.method.relax.nu = nu;
  if (kind == sampling::RelaxKind::kLantern) {
    // Image tokens 1..3 as codes on a line; lambda/k from delta for a sweep.
    const at::Tensor codebook = at::tensor({0.0f, 1.0f, 2.5f}).view({3, 1});
    request.method.relax.neighbours = sampling::lantern_neighbours(codebook, 2, 1, model.vocab_size());
    request.method.relax.lantern_k = 2;
    request.method.relax.lantern_lambda = delta;
    request.method.relax.lantern_own_residual = lantern_own_residual;
  }
  request.rows = sjd::testing::table_rows(false);
  const auto exact = sjd::testing::exact_distribution(model, layout, request.pipeline, 1);
  LossyRun r;
  const auto counts = sjd::testing::sample_sequences(model, layout, request, 8000, {}, &r.steps);
  r.fit = sjd::testing::chi_square_fit(exact, counts);
  return r;
}

}  // namespace

TEST_CASE("uniform relaxation: exact at delta 1, TV grows with delta, steps shrink", "[lossy]") {
  for (const std::string method : {"sjd", "scd-mc", "sjd-pac"}) {
    const auto d1 = run(method, sampling::RelaxKind::kUniform, 1.0);
    const auto d2 = run(method, sampling::RelaxKind::kUniform, 2.0);
    const auto d6 = run(method, sampling::RelaxKind::kUniform, 6.0);
    INFO(method << ": TV " << d1.fit.total_variation << " / " << d2.fit.total_variation << " / "
                << d6.fit.total_variation << ", steps " << d1.steps << " / " << d2.steps << " / " << d6.steps);
    CHECK(d1.fit.p_value > 1e-3);
    CHECK(d2.fit.p_value < 1e-6);
    CHECK(d6.fit.total_variation > d2.fit.total_variation);
    CHECK(d2.fit.total_variation > d1.fit.total_variation);
    CHECK(d6.steps < d1.steps);
  }
}

TEST_CASE("relaxations with every weight at most 1 sample exactly and are labelled exact", "[lossy]") {
  // Uniform below 1 accepts less than the plain test and still samples p (chi-square at 1e-3, 8000 sequences);
  // the broken variant, delta 2, is rejected by the same test in the case above.
  for (const std::string method : {"sjd", "scd-mc", "sjd-pac"}) {
    const auto below = run(method, sampling::RelaxKind::kUniform, 0.6);
    INFO(method << ": TV " << below.fit.total_variation << ", p " << below.fit.p_value);
    CHECK(below.fit.p_value > 1e-3);
  }
  const auto cool = run("sjd", sampling::RelaxKind::kCool, 0.8, 0.0);
  CHECK(cool.fit.p_value > 1e-3);
  const auto label = [](sampling::RelaxKind kind, double delta, double nu, double lambda = 2.0) {
    decoding::MethodConfig m = decoding::make_method("sjd");
    m.relax.kind = kind;
    m.relax.delta = delta;
    m.relax.nu = nu;
    m.relax.lantern_lambda = lambda;
    return m.exactness();
  };
  CHECK(label(sampling::RelaxKind::kUniform, 0.6, 0.0) == decoding::Exactness::kExact);
  CHECK(label(sampling::RelaxKind::kUniform, 1.0, 0.0) == decoding::Exactness::kExact);
  CHECK(label(sampling::RelaxKind::kUniform, 1.1, 0.0) == decoding::Exactness::kLossy);
  CHECK(label(sampling::RelaxKind::kCool, 0.8, 0.0) == decoding::Exactness::kExact);
  // With decay Cool-SD's first weight passes 1 in a long window (0.8 e^-0.5 L / sum e^-0.5i is 1.46 at L = 4).
  CHECK(label(sampling::RelaxKind::kCool, 0.8, 0.5) == decoding::Exactness::kLossy);
  CHECK(label(sampling::RelaxKind::kLantern, 1.0, 0.0, 0.0) == decoding::Exactness::kExact);
  CHECK(label(sampling::RelaxKind::kLantern, 1.0, 0.0, 0.5) == decoding::Exactness::kLossy);
  // The relaxation stays in the method's description when it is exact: its tokens are not plain sjd's.
  decoding::MethodConfig m = decoding::make_method("sjd");
  m.relax.kind = sampling::RelaxKind::kUniform;
  m.relax.delta = 0.6;
  CHECK_THAT(m.describe(), Catch::Contains("relax=uniform, delta=0.6") && Catch::Contains("[exact]"));
}

TEST_CASE("Cool-SD: TV grows with delta, and nu = 0 with delta = 1 is exact", "[lossy]") {
  const auto exact = run("sjd", sampling::RelaxKind::kCool, 1.0, 0.0);
  const auto mild = run("sjd", sampling::RelaxKind::kCool, 1.5);
  const auto strong = run("sjd", sampling::RelaxKind::kCool, 4.0);
  INFO("TV " << exact.fit.total_variation << " / " << mild.fit.total_variation << " / " << strong.fit.total_variation);
  CHECK(exact.fit.p_value > 1e-3);
  CHECK(mild.fit.p_value < 1e-6);  // lossy already at delta 1.5
  CHECK(strong.fit.total_variation > mild.fit.total_variation);
  CHECK(strong.steps < exact.steps);
}

TEST_CASE("LANTERN++: exact at lambda 0 with either residual, biased, and more so with a larger lambda", "[lossy]") {
  // At lambda 0 no neighbour joins the draft: the lossless test, and the own residual is max(p - q, 0).
  const auto none = run("sjd", sampling::RelaxKind::kLantern, 0.0);
  const auto none_own = run("sjd", sampling::RelaxKind::kLantern, 0.0, 0.7, /*lantern_own_residual=*/true);
  const auto small = run("sjd", sampling::RelaxKind::kLantern, 0.5);
  const auto large = run("sjd", sampling::RelaxKind::kLantern, 4.0);
  const auto large_own = run("sjd", sampling::RelaxKind::kLantern, 4.0, 0.7, /*lantern_own_residual=*/true);
  INFO("TV " << none.fit.total_variation << " / " << small.fit.total_variation << " / " << large.fit.total_variation
             << " (own residual " << none_own.fit.total_variation << " / " << large_own.fit.total_variation
             << "), steps " << none.steps << " / " << small.steps << " / " << large.steps);
  CHECK(none.fit.p_value > 1e-3);
  CHECK(none_own.fit.p_value > 1e-3);
  CHECK(large.fit.p_value < 1e-6);
  CHECK(large_own.fit.p_value < 1e-6);
  CHECK(large.fit.total_variation > small.fit.total_variation);
}

namespace {

// Token counts of scd-mc's coupled next draft over 10000 steps, the old drafts drawn in q_old's proportions
// (2000, 3000, 5000 of tokens 1..3), each step its own uniforms, under uniform delta = 2.
std::map<int64_t, long> coupled_draft_counts(const at::Tensor& p, const at::Tensor& q_old, const decoding::Mutants& mutants) {
  const family::TokenLayout layout(6, std::vector<int64_t>(4, -1), 2, 2, 0, 6);
  decoding::MethodConfig method = decoding::make_method("scd-mc");
  method.relax.kind = sampling::RelaxKind::kUniform;
  method.relax.delta = 2.0;
  const decoding::DraftBook book(layout, method, mutants, 7, 0);
  std::map<int64_t, long> counts;
  uint32_t step = 0;
  for (int64_t token = 1; token <= 3; ++token) {
    const decoding::Draft old{token, q_old, 1};
    for (int n = 0; n < static_cast<int>(10000 * q_old[token].item<float>() + 0.5f); ++n) {
      ++counts[book.update_tail(2, p, &old, step++).token];
    }
  }
  return counts;
}

}  // namespace

TEST_CASE("a coupled draft is distributed as the p it records, also under a relaxation", "[lossy]") {
  // The next verification takes p as the coupled draft's q, so the coupling must be exact whatever relaxation
  // loosens the commit. A relaxed coupling (the mutant) keeps token 3 in 80% of its draws, not 40%: token 3's
  // share becomes 0.40, not p's 0.20. Significance: a correct coupling passes at p > 1e-3, the mutant fails at
  // p < 1e-6 (fixed uniforms: step keys 0..9999, seed 7).
  const at::Tensor p = at::tensor({0.0f, 0.5f, 0.3f, 0.2f, 0.0f, 0.0f});
  const at::Tensor q_old = at::tensor({0.0f, 0.2f, 0.3f, 0.5f, 0.0f, 0.0f});
  std::map<int64_t, double> exact;
  for (int64_t v = 0; v < 6; ++v) {
    if (p[v].item<float>() > 0.0f) exact[v] = p[v].item<float>();
  }
  const auto fit = sjd::testing::chi_square_fit(exact, coupled_draft_counts(p, q_old, {}));
  CHECK(fit.p_value > 1e-3);
  decoding::Mutants relaxed;
  relaxed.relaxed_coupling = true;
  const auto broken = sjd::testing::chi_square_fit(exact, coupled_draft_counts(p, q_old, relaxed));
  INFO("p-values: exact coupling " << fit.p_value << ", relaxed coupling " << broken.p_value);
  CHECK(broken.p_value < 1e-6);
}
