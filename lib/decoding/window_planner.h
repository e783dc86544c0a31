#pragma once
// The automatic window: before each step, the chain length L and (for sjd-pac,
// after a rejection) the proactive tree's K candidates per level and D levels
// that maximise expected committed tokens per millisecond, from the step-cost
// profile and the acceptance this image has shown so far.
//
// Acceptance is learned per draft age (how many windows have computed p for
// the position: Jacobi iterations refine a draft), because a window's length
// sets the ages its drafts reach: in steady state with L positions and c tokens
// committed per step, the draft at offset j has been refined about (L - j) / c
// times. Each L is scored at that steady state, so a longer window gets credit
// for the better drafts it grows, not only for its extra positions.
//
// Exactness: the shape is a function of the settings, the profile and the
// outcomes of earlier steps only -- never of the coming step's random draws --
// so every verification still compares fresh, independent draws against drafts
// fixed before them (docs/methods.md, "Automatic windows").
#include <cstdint>
#include <vector>

#include "decoding/method.h"
#include "decoding/step_cost.h"

namespace sjd::decoding {

struct WindowShape {
  int chain = 0;       // draft positions on the spine (L)
  int tree_k = 1;      // candidates per proactive tree level (1: no tree)
  int tree_depth = 0;  // tree levels (D)
};

// Draft nodes a window of this shape puts through the model besides the root.
int window_nodes(const WindowShape& shape);

// The largest shape a method's windows take, automatic ones included (for sizing the KV cache).
WindowShape largest_window(const MethodConfig& method);

// What verification showed about one step's window.
struct WindowReport {
  WindowShape shape;
  std::vector<int> ages;          // age of each chain draft, -1 for a forced structure token
  int accepted = 0;               // drafts accepted along the path
  bool rejected = false;          // stopped at a rejected draft (not at the window's end)
  // Candidates at each tree level: fewer than tree_k where q held fewer tokens (one at a forced
  // structure token, or after a point-mass initial draft); empty: tree_k at every level.
  std::vector<int> tree_candidates;
};

// What the planner assumes of an image's drafts before they show it, and whether it learns from them.
struct WindowPrior {
  // Acceptance of a chain draft at age 0, 1, and 2 or more, measured on the model (a bundle's
  // "window_prior"); empty: the generic prior (window_planner.cpp).
  std::vector<double> by_age;
  // Follow the image's own outcomes. A batch plans from the prior alone: its forward is as wide
  // as its widest window, so sequences that each followed their own outcomes would make every
  // step pay for the longest of their diverging windows (docs/methods.md, "batch").
  bool learn = true;
};

class WindowPlanner {
 public:
  // Auto limits: the longest chain and the largest tree the planner considers.
  static constexpr int kMaxAutoChain = 64;
  static constexpr int kMaxAutoK = 4;
  static constexpr int kMaxAutoDepth = 3;
  static constexpr int kAgeBins = 12;  // ages 0 .. kAgeBins-1; older drafts share the last bin

  WindowPlanner(const MethodConfig& method, StepCostProfile profile, int rows, WindowPrior prior = {});

  const StepCostProfile& profile() const { return profile_; }
  // The prior in use, by age (0, 1, 2+), and whether outcomes update it.
  const std::vector<double>& prior_by_age() const { return prior_by_age_; }
  bool learns() const { return learn_; }
  // Chain drafts tested and accepted so far, per age bin, without the decay the
  // estimates use: what stats.json reports, to show why the windows are as long as they are.
  struct AgeTally {
    int64_t tested = 0;
    int64_t accepted = 0;
  };
  const std::vector<AgeTally>& tallies() const { return tallies_; }
  // The next window. `after_rejection`: the last step rejected a draft, so an
  // sjd-pac tree may be drafted; `remaining`: positions left to generate.
  WindowShape next(bool after_rejection, int remaining) const;
  void record(const WindowReport& report);
  // The acceptance expected of a tree level of k candidates whose first alone would pass at `single`:
  // a prior from `single`, then the levels of k candidates this image verified.
  double tree_acceptance(int k, double single) const;

 private:
  struct Count {
    double tested = 0.0;
    double accepted = 0.0;
  };
  std::vector<double> rates_by_age() const;  // estimated acceptance of a single draft per age bin
  // The rate at a fractional age (linear between bins).
  static double interpolate(const std::vector<double>& rate, double age);
  // Expected tokens per step with a chain of L in steady state.
  static double steady_tokens(int chain, const std::vector<double>& rate);

  const MethodConfig& method_;
  StepCostProfile profile_;
  int rows_;
  std::vector<double> prior_by_age_;
  bool learn_;
  // [t]: the cheapest step of t tokens or more (up to the largest window), so the search can stop
  // at the first chain that could not pay even if every draft were accepted.
  std::vector<double> cheapest_from_;
  std::vector<Count> by_age_;  // [age]
  std::vector<AgeTally> tallies_;  // [age]
  std::vector<Count> tree_;    // [k - 1]: tree levels verified with k candidates
};

}  // namespace sjd::decoding
