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
};

// Pearson's two-sample (homogeneity) test of two count vectors over the same outcomes: the p-value that both
// come from one distribution. Outcomes neither sample holds are left out; fewer than two left give 1.
double two_sample_p(const std::vector<long>& a, const std::vector<long>& b);

// Pearson's test of observed counts against exact probabilities (cells whose
// expected count is below 5 are pooled into one cell). Keys are outcomes.
template <typename Key>
FitResult chi_square_fit(const std::map<Key, double>& exact, const std::map<Key, long>& observed);

}  // namespace sjd::testing

#include "testing/statistics_impl.h"
