#pragma once
// Goodness-of-fit helpers for the exact-distribution tests.
#include <map>
#include <vector>

namespace sjd::testing {

// Upper tail P(X >= x) of a chi-square variable with `dof` degrees of freedom.
double chi_square_upper_tail(double x, double dof);

struct FitResult {
  double chi_square = 0.0;
  int dof = 0;
  double p_value = 1.0;
  double total_variation = 0.0;  // between the empirical and the exact distribution
  long impossible = 0;           // samples of outcomes the exact law gives probability 0 (or does not list)
};

// Pearson's test of observed counts against exact probabilities. Keys are outcomes. Cells whose
// expected count is below 5 are pooled into one cell, and that pool joins the smallest other cell when
// it is itself expected fewer than 5 times. One sample of an outcome the exact law calls impossible
// (probability 0, or not listed) fails the fit outright (p-value 0): in a pool of rare outcomes it
// would be diluted, and a constraint bug that emits a few impossible sequences would pass.
template <typename Key>
FitResult chi_square_fit(const std::map<Key, double>& exact, const std::map<Key, long>& observed);

}  // namespace sjd::testing

#include "testing/statistics_impl.h"
