#pragma once
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace sjd::testing {

template <typename Key>
FitResult chi_square_fit(const std::map<Key, double>& exact, const std::map<Key, long>& observed) {
  long n = 0;
  for (const auto& [key, count] : observed) n += count;
  FitResult r;
  double tv = 0.0;
  // (expected, observed) per cell; outcomes expected fewer than 5 times are pooled into one cell. Samples of
  // impossible outcomes are counted apart: any of them fails the fit.
  std::vector<std::pair<double, double>> cells;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  for (const auto& [key, p] : exact) {
    const auto it = observed.find(key);
    const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
    tv += std::abs(o / n - p);
    const double e = p * n;
    if (!(p > 0.0)) {
      r.impossible += static_cast<long>(o);
    } else if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += o;
    } else {
      cells.emplace_back(e, o);
    }
  }
  for (const auto& [key, count] : observed) {
    if (!exact.count(key)) {
      tv += static_cast<double>(count) / n;
      r.impossible += count;
    }
  }
  if (pooled_expected > 0.0) {
    if (pooled_expected >= 5.0 || cells.empty()) {
      cells.emplace_back(pooled_expected, pooled_observed);
    } else {
      // A pool itself expected fewer than 5 times would make one stray sample a huge chi-square term:
      // it joins the smallest regular cell instead.
      auto smallest = std::min_element(cells.begin(), cells.end());
      smallest->first += pooled_expected;
      smallest->second += pooled_observed;
    }
  }
  for (const auto& [e, o] : cells) r.chi_square += (o - e) * (o - e) / e;
  r.dof = std::max(static_cast<int>(cells.size()) - 1, 1);
  r.p_value = r.impossible > 0 ? 0.0 : chi_square_upper_tail(r.chi_square, r.dof);
  r.total_variation = tv / 2.0;
  return r;
}

}  // namespace sjd::testing
