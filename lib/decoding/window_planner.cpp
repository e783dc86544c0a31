#include "decoding/window_planner.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace sjd::decoding {
namespace {

constexpr double kPriorWeight = 4.0;  // pseudo-observations behind each estimate
// Acceptance assumed before any step, by draft age, for a model that has not measured
// its own: an initial draft is a guess, one Jacobi iteration makes it a draw from a p
// that was nearly right, more iterations settle. (Measured on the first default model,
// random init: 0.15, 0.5, 0.7-0.75.)
constexpr std::array<double, 3> kGenericPriorByAge = {0.2, 0.5, 0.65};
constexpr double kDecay = 0.98;       // per step: acceptance drifts over an image, old steps count less

double estimate(double accepted, double tested, double prior) {
  return (accepted + kPriorWeight * prior) / (tested + kPriorWeight);
}

}  // namespace

int window_nodes(const WindowShape& s) {
  int nodes = s.chain;
  if (s.tree_k > 1) {
    int level = 1;  // nodes at a depth: k^d, one of which is the spine's
    for (int d = 0; d < s.tree_depth && d < s.chain; ++d) nodes += (level *= s.tree_k) - 1;
  }
  return nodes;
}

WindowPlanner::WindowPlanner(const MethodConfig& method, StepCostProfile profile, int rows, WindowPrior prior)
    : method_(method),
      profile_(std::move(profile)),
      rows_(std::max(rows, 1)),
      prior_by_age_(prior.by_age.empty() ? std::vector<double>(kGenericPriorByAge.begin(), kGenericPriorByAge.end())
                                         : std::move(prior.by_age)),
      learn_(prior.learn),
      by_age_(kAgeBins),
      tallies_(kAgeBins),
      tree_(kMaxAutoK) {
  if (profile_.empty()) profile_ = StepCostProfile::generic();
  const int most = 1 + window_nodes(largest_window(method_));
  cheapest_from_.assign(static_cast<size_t>(most) + 1, 0.0);
  cheapest_from_[static_cast<size_t>(most)] = profile_.ms(most, rows_);
  for (int t = most - 1; t >= 1; --t) {
    cheapest_from_[static_cast<size_t>(t)] =
        std::min(profile_.ms(t, rows_), cheapest_from_[static_cast<size_t>(t) + 1]);
  }
}

WindowShape largest_window(const MethodConfig& method) {
  WindowShape s;
  if (!method.speculative()) return s;
  s.chain = method.auto_window ? WindowPlanner::kMaxAutoChain : method.window;
  if (method.proactive_tree) {
    s.tree_k = method.auto_tree ? WindowPlanner::kMaxAutoK : method.pd_k;
    s.tree_depth = method.auto_tree ? WindowPlanner::kMaxAutoDepth : method.pd_depth;
  }
  return s;
}

std::vector<double> WindowPlanner::rates_by_age() const {
  std::vector<double> rate(by_age_.size());
  for (size_t g = 0; g < by_age_.size(); ++g) {
    rate[g] = estimate(by_age_[g].accepted, by_age_[g].tested, prior_by_age_[std::min(g, prior_by_age_.size() - 1)]);
  }
  return rate;
}

double WindowPlanner::interpolate(const std::vector<double>& rate, double age) {
  const double top = static_cast<double>(rate.size() - 1);
  const double a = std::clamp(age, 0.0, top);
  const size_t lo = static_cast<size_t>(a);
  const size_t hi = std::min(lo + 1, rate.size() - 1);
  return rate[lo] + (rate[hi] - rate[lo]) * (a - static_cast<double>(lo));
}

double WindowPlanner::steady_tokens(int chain, const std::vector<double>& rate) {
  double tokens = 1.0;
  for (int iteration = 0; iteration < 6; ++iteration) {  // fixed point of c = 1 + sum_j prod_i a((L - i) / c)
    double next = 1.0, reach = 1.0;
    for (int j = 1; j <= chain; ++j) {
      reach *= interpolate(rate, static_cast<double>(chain - j) / tokens);
      next += reach;
    }
    tokens = next;
  }
  return tokens;
}

double WindowPlanner::tree_acceptance(int k, double single) const {
  // Prior: k independent tries at the single-draft rate; then what this image showed.
  const double prior = 1.0 - std::pow(1.0 - single, k);
  const Count& c = tree_[static_cast<size_t>(k - 1)];
  return estimate(c.accepted, c.tested, prior);
}

WindowShape WindowPlanner::next(bool after_rejection, int remaining) const {
  WindowShape best = largest_window(method_);
  if (!method_.speculative()) return best;
  const bool tree_now = method_.proactive_tree && after_rejection;
  if (!tree_now) best.tree_k = 1, best.tree_depth = 0;
  const int max_chain = std::max(1, std::min(best.chain, remaining));
  best.chain = std::min(best.chain, max_chain);
  if (!method_.auto_window && !(tree_now && method_.auto_tree)) return best;

  // Auto may choose no drafts at all (an AR step) when no window pays for itself;
  // the estimates drift back to the prior as old steps decay, so it tries again.
  const int chain_lo = method_.auto_window ? 0 : best.chain;
  const int chain_hi = method_.auto_window ? max_chain : best.chain;
  const bool auto_tree = tree_now && method_.auto_tree;
  const std::vector<double> rate = rates_by_age();  // once per step: the search below reads it ~10^5 times
  const int k_lo = auto_tree ? 1 : best.tree_k, k_hi = auto_tree ? kMaxAutoK : best.tree_k;
  const int fixed_depth = best.tree_depth;  // read before the search overwrites `best`
  // No window commits more than (1 + a) / (1 - a) tokens a step, a being the best acceptance any
  // draft or tree level can have: each reach is a product of such rates, the steady chain's sum and
  // a tree's gain each stay under a / (1 - a). (The margin covers rounding in the sums.)
  double a = *std::max_element(rate.begin(), rate.end());
  const double single_best = a;
  for (int k = std::max(k_lo, 2); k <= k_hi; ++k) a = std::max(a, tree_acceptance(k, single_best));
  const double most_tokens = (1.0 + a) / (1.0 - a) * (1.0 + 1e-9);
  double best_rate = -1.0;
  for (int chain = chain_lo; chain <= chain_hi; ++chain) {
    // Steps only get dearer from here on (cheapest_from_ grows with t): stop once even the most
    // tokens could not beat the best found.
    if (chain > chain_lo && most_tokens / cheapest_from_[static_cast<size_t>(1 + chain)] < best_rate) break;
    const double tokens = steady_tokens(chain, rate);
    for (int k = k_lo; k <= k_hi; ++k) {
      // A tree is no deeper than the chain (build_window cuts it there): a fixed tree's depth is
      // cut too, so chains shorter than it, the AR step among them, are weighed as well.
      const int d_hi = std::min(k > 1 ? (auto_tree ? kMaxAutoDepth : fixed_depth) : 0, chain);
      const int d_lo = k > 1 && auto_tree ? 1 : d_hi;
      for (int depth = d_lo; depth <= d_hi; ++depth) {
        // A tree raises the first `depth` levels' acceptance; the rest of the chain is as in steady state.
        double gain = 0.0, reach_single = 1.0, reach_tree = 1.0;
        for (int j = 1; j <= depth; ++j) {
          const double single = interpolate(rate, static_cast<double>(chain - j) / tokens);
          reach_single *= single;
          reach_tree *= tree_acceptance(k, single);
          gain += reach_tree - reach_single;
        }
        const WindowShape s = depth > 0 ? WindowShape{chain, k, depth} : WindowShape{chain, 1, 0};
        const double per_ms = (tokens + gain) / profile_.ms(1 + window_nodes(s), rows_);
        if (per_ms > best_rate) {
          best_rate = per_ms;
          best = s;
        }
      }
    }
  }
  return best;
}

void WindowPlanner::record(const WindowReport& r) {
  for (Count& c : by_age_) c.tested *= kDecay, c.accepted *= kDecay;
  for (Count& c : tree_) c.tested *= kDecay, c.accepted *= kDecay;
  const int tested = std::min(r.shape.chain, r.accepted + (r.rejected ? 1 : 0));
  const int tree_levels = r.shape.tree_k > 1 ? r.shape.tree_depth : 0;
  for (int j = 1; j <= tested; ++j) {
    const bool passed = j <= r.accepted;
    const bool forced = j <= static_cast<int>(r.ages.size()) && r.ages[static_cast<size_t>(j - 1)] < 0;
    if (forced) continue;  // a structure token says nothing about drafts, in a tree level or the chain
    // A level counts as one of as many candidates as q offered; one of one tried its chain draft alone and is
    // counted by that draft's age.
    int candidates = 1;
    if (j <= tree_levels) {
      candidates = j <= static_cast<int>(r.tree_candidates.size()) ? r.tree_candidates[static_cast<size_t>(j - 1)]
                                                                  : r.shape.tree_k;
    }
    Count* c = nullptr;
    if (candidates > 1) {
      c = &tree_[static_cast<size_t>(std::min(candidates, r.shape.tree_k) - 1)];  // several candidates were tried
    } else if (j <= static_cast<int>(r.ages.size())) {
      const auto bin = static_cast<size_t>(std::min(r.ages[static_cast<size_t>(j - 1)], kAgeBins - 1));
      c = &by_age_[bin];
      tallies_[bin].tested += 1;
      tallies_[bin].accepted += passed ? 1 : 0;
    }
    if (c == nullptr || !learn_) continue;  // a planner that does not learn only tallies
    c->tested += 1.0;
    c->accepted += passed ? 1.0 : 0.0;
  }
}

}  // namespace sjd::decoding
