#include "sampling/rejection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sampling/categorical.h"

namespace sjd::sampling {
namespace {

// Accept draft with probability min(1, score/q(draft)). A draft with q == 0
// cannot have been drawn from q; it is treated as always rejected.
bool accept_test(double score, double q_draft, const RngKey& key) {
  if (!(q_draft > 0.0)) return false;
  const double ratio = score / q_draft;
  return ratio >= 1.0 || uniform01(key, 0) < ratio;
}

// Draw from unnormalised residual weights; if rounding left no mass (p == q up
// to float error, a rejection of probability ~0), fall back to p itself.
int64_t draw_residual(const float* residual, const float* p, int64_t n, const RngKey& key) {
  const int64_t token = sample_race(residual, n, key);
  return token >= 0 ? token : sample_token(p, n, key);  // p with no positive weight (NaN logits) is an error
}

}  // namespace

VerifyOutcome verify_draft(const float* p, const float* q, int64_t n, int64_t draft, const Relaxation& relax,
                           double weight, const VerifyKeys& keys, float* scratch) {
  if (accept_test(relaxed_score(relax, p, draft, weight), q[draft], keys.accept)) return {true, 0, draft};
  relaxed_residual(relax, p, q, n, draft, weight, scratch);
  return {false, -1, draw_residual(scratch, p, n, keys.residual)};
}

VerifyOutcome verify_candidates(const float* p, const float* q, int64_t n, const std::vector<int64_t>& candidates,
                                const Relaxation& relax, double weight, const VerifyKeys& keys, Mutant mutant) {
  std::vector<float> target(p, p + n);   // p^(k)
  std::vector<float> draft_q(q, q + n);  // q^(k) before renormalisation
  std::vector<float> residual(n);
  // q's mass left after the earlier candidates, summed from the row itself rather than taken as 1 minus their q:
  // a float softmax row sums to 1 only within ~1e-6, and once the tried candidates held nearly all of q that
  // error divided by what is left skewed q^(k) by percents (an off-spine level after a peaked stale p).
  const auto mass_of = [](const std::vector<float>& row) { return std::accumulate(row.begin(), row.end(), 0.0); };
  double q_remaining = mutant == Mutant::kAssumeUnitDraftMass ? 1.0 : mass_of(draft_q);
  for (size_t k = 0; k < candidates.size(); ++k) {
    const int64_t c = candidates[k];
    RngKey accept_key = keys.accept;
    accept_key.sub = static_cast<uint32_t>(k);
    std::vector<float> qk(n);
    for (int64_t v = 0; v < n; ++v) qk[v] = static_cast<float>(draft_q[v] / q_remaining);
    if (accept_test(relaxed_score(relax, target.data(), c, weight), qk[c], accept_key)) {
      return {true, static_cast<int>(k), c};
    }
    relaxed_residual(relax, target.data(), qk.data(), n, c, weight, residual.data());
    const double mass = std::accumulate(residual.begin(), residual.end(), 0.0);
    if (mass > 0.0) {
      const double scale = mutant == Mutant::kSkipResidualRenormalisation ? 1.0 : 1.0 / mass;
      for (int64_t v = 0; v < n; ++v) target[v] = static_cast<float>(residual[v] * scale);
    }
    const float tried = draft_q[c];
    draft_q[c] = 0.0f;
    q_remaining = mutant == Mutant::kAssumeUnitDraftMass ? q_remaining - tried : mass_of(draft_q);
    if (!(q_remaining > 0.0)) break;  // q is exhausted: no further candidate exists
  }
  RngKey residual_key = keys.residual;
  residual_key.sub = static_cast<uint32_t>(candidates.size());
  return {false, -1, draw_residual(target.data(), p, n, residual_key)};
}

}  // namespace sjd::sampling
