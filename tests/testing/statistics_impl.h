#pragma once
#include <cmath>

namespace sjd::testing {

template <typename Key>
FitResult chi_square_fit(const std::map<Key, double>& exact, const std::map<Key, long>& observed) {
  long n = 0;
  for (const auto& [key, count] : observed) n += count;
  FitResult r;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  int cells = 0;
  double tv = 0.0;
  for (const auto& [key, p] : exact) {
    const auto it = observed.find(key);
    const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
    tv += std::abs(o / n - p);
    const double e = p * n;
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += o;
      continue;
    }
    r.chi_square += (o - e) * (o - e) / e;
    ++cells;
  }
  for (const auto& [key, count] : observed) {
    if (!exact.count(key)) {  // an outcome the exact distribution says is impossible
      pooled_observed += static_cast<double>(count);
      tv += static_cast<double>(count) / n;
    }
  }
  if (pooled_expected > 0.0 || pooled_observed > 0.0) {
    const double e = std::max(pooled_expected, 1e-9);
    r.chi_square += (pooled_observed - e) * (pooled_observed - e) / e;
    ++cells;
  }
  r.dof = std::max(cells - 1, 1);
  r.p_value = chi_square_upper_tail(r.chi_square, r.dof);
  r.total_variation = tv / 2.0;
  return r;
}

}  // namespace sjd::testing
