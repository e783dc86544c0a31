#include "sampling/categorical.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace sjd::sampling {

int64_t sample_race(const float* w, int64_t n, const RngKey& key) {
  int64_t best = -1;
  double best_score = -1.0;
  for (int64_t block = 0; block * 4 < n; ++block) {
    const auto words = philox_block(key, static_cast<uint32_t>(block));
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t v = block * 4 + j;
      if (v >= n) break;
      if (!(w[v] > 0.0f)) continue;
      const double u = (static_cast<double>(words[j]) + 0.5) * (1.0 / 4294967296.0);
      const double score = static_cast<double>(w[v]) / -std::log(u);
      if (score > best_score) {
        best_score = score;
        best = v;
      }
    }
  }
  return best;
}

void throw_no_positive_probability() {
  throw NonFiniteLogits("sampling: no token has a positive probability (the logits are not finite)");
}

int64_t sample_token(const float* w, int64_t n, const RngKey& key) {
  const int64_t token = sample_race(w, n, key);
  if (token < 0) throw_no_positive_probability();
  return token;
}

int64_t argmax(const float* p, int64_t n) {
  const int64_t best = static_cast<int64_t>(std::max_element(p, p + n) - p);
  if (n <= 0 || !(p[best] > 0.0f)) throw_no_positive_probability();
  return best;
}

std::vector<int64_t> draw_without_replacement(const float* q, int64_t n, int k, const RngKey& key) {
  std::vector<std::pair<double, int64_t>> scored;
  for (int64_t v = 0; v < n; ++v) {
    if (!(q[v] > 0.0f)) continue;
    scored.emplace_back(static_cast<double>(q[v]) / -std::log(uniform01(key, static_cast<uint32_t>(v))), v);
  }
  const size_t take = std::min<size_t>(static_cast<size_t>(std::max(k, 0)), scored.size());
  // Equal scores go to the lower token, as the device's kernel does (partial_sort alone leaves
  // their order unspecified).
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(take), scored.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < take; ++i) tokens.push_back(scored[i].second);
  return tokens;
}

}  // namespace sjd::sampling
