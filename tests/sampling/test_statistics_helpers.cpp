// The goodness-of-fit helpers every statistical test's significance rests on (tests/testing/statistics.h),
// against values of the chi-square law from tables (scipy.stats.chi2.sf gives the same to 1e-12).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "testing/statistics.h"

using sjd::testing::chi_square_fit;
using sjd::testing::chi_square_upper_tail;

TEST_CASE("chi-square upper tail: the tabled critical values", "[testing][statistics]") {
  CHECK(chi_square_upper_tail(3.841458820694124, 1) == Approx(0.05).epsilon(1e-9));
  CHECK(chi_square_upper_tail(10.827566170662733, 1) == Approx(0.001).epsilon(1e-9));
  CHECK(chi_square_upper_tail(18.307038053275146, 10) == Approx(0.05).epsilon(1e-9));
  CHECK(chi_square_upper_tail(2.0, 2) == Approx(std::exp(-1.0)).epsilon(1e-9));  // two dof: exp(-x / 2)
  CHECK(chi_square_upper_tail(250.0, 200) == Approx(0.009379131668826098).epsilon(1e-7));
  CHECK(chi_square_upper_tail(0.0, 3) == Approx(1.0));
}

TEST_CASE("chi-square fit: Pearson's statistic, its degrees of freedom and p-value", "[testing][statistics]") {
  const std::map<int, double> fair = {{0, 0.5}, {1, 0.5}};
  const auto off = chi_square_fit(fair, std::map<int, long>{{0, 60}, {1, 40}});
  CHECK(off.chi_square == Approx(4.0));  // (60 - 50)^2 / 50 + (40 - 50)^2 / 50
  CHECK(off.dof == 1);
  CHECK(off.p_value == Approx(0.04550026389635857).epsilon(1e-9));
  CHECK(off.total_variation == Approx(0.1));
  const auto exact = chi_square_fit(fair, std::map<int, long>{{0, 50}, {1, 50}});
  CHECK(exact.chi_square == Approx(0.0).margin(1e-12));
  CHECK(exact.p_value == Approx(1.0));
  // An outcome the exact law does not list (it is impossible) fails the fit outright.
  const auto impossible = chi_square_fit(std::map<int, double>{{0, 1.0}}, std::map<int, long>{{0, 99}, {1, 1}});
  CHECK(impossible.p_value < 1e-6);
}

TEST_CASE("chi-square fit: impossible outcomes fail the fit even among many rare ones", "[testing][statistics]") {
  // 6000 samples: outcome 0 at 0.95 and 100 rare outcomes at 0.0005 each (expected 3 times, pooled: 300 in
  // all). 30 samples of an impossible outcome hidden in that pool passed the old helper at p = 0.076 (Pearson 3.16
  // on one degree of freedom: the pool expected 300 and saw 330), a fit that a 1e-3 threshold accepts.
  std::map<int, double> law = {{0, 0.95}, {-1, 0.0}};
  std::map<int, long> counts = {{0, 5700}};
  for (int k = 1; k <= 100; ++k) {
    law[k] = 0.0005;
    counts[k] = 3;
  }
  const auto clean = chi_square_fit(law, counts);
  CHECK(clean.impossible == 0);
  CHECK(clean.p_value > 0.5);
  counts[0] -= 30;
  for (const int outcome : {-1, 1000}) {  // listed at probability 0, and not listed at all
    INFO("impossible outcome " << outcome);
    auto tainted = counts;
    tainted[outcome] = 30;
    const auto fit = chi_square_fit(law, tainted);
    CHECK(fit.impossible == 30);
    CHECK(fit.p_value == 0.0);
    CHECK(fit.total_variation == Approx(0.005));
  }
}
