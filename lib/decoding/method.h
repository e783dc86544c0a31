#pragma once
// A decoding method is three choices over one generation loop:
//   drafting     how window positions get their drafts (initialisation of new
//                positions; how kept tail drafts are re-coupled, which is where
//                SJD-PAC's adaptive continuation lives: the maximal coupling;
//                proactive tree)
//   verification commits up to the first rejection; single draft or
//                multi-candidate (tree levels)
//   relaxation   the acceptance test (exact, or a lossy relaxation)
#include <string>
#include <vector>

#include "sampling/relaxation.h"

namespace sjd::decoding {

enum class InitScheme { kRandom, kRepeatLeft, kRepeatUp, kSampleLeft, kSampleUp };

// What a method's images are, as the labels report it:
//   exact   samples the model's own distribution (the distribution ar samples)
//   greedy  deterministic argmax decoding (jacobi always; any method at temperature 0)
//   lossy   a relaxed acceptance test: the distribution differs from the model's
enum class Exactness { kExact, kGreedy, kLossy };
std::string exactness_name(Exactness exactness);  // "exact" | "greedy" | "lossy"

// How a drafted position whose p was just computed becomes the next draft.
enum class TailUpdate {
  kResample,        // sjd: a fresh independent draw from the new p (the Jacobi update)
  kGreedy,          // jacobi: argmax of the new p
  kGumbelShared,    // scd-gs: argmax(log p + g), g fixed per (sequence, position, token)
  kMaximalCoupling  // scd-mc / sjd-pac: the MRS output of the old draft against the new p
};

struct MethodConfig {
  std::string name = "ar";
  int window = 16;             // draft positions per step (the chain length L)
  InitScheme init = InitScheme::kRandom;
  TailUpdate tail = TailUpdate::kResample;
  bool proactive_tree = false; // SJD-PAC proactive drafting after a rejection
  int pd_k = 4;                // candidates per tree depth
  int pd_depth = 3;            // tree depth D
  bool auto_window = false;    // choose L before each step (decoding/window_planner.h); `window` is then unused
  bool auto_tree = false;      // sjd-pac: choose K and D before each tree window; pd_k/pd_depth unused
  bool greedy = false;         // jacobi decodes with temperature 0
  sampling::Relaxation relax;

  bool speculative() const { return name != "ar"; }
  // sample-left/up draw drafts from the p of a neighbour decoded earlier, so such a method keeps those rows;
  // ar drafts nothing, whatever its init.
  bool drafts_from_stale_p() const {
    return speculative() && (init == InitScheme::kSampleLeft || init == InitScheme::kSampleUp);
  }
  // The window planner chooses the chain or the tree before steps: what reads the step-cost
  // profile and the acceptance prior (decoding/window_planner.h).
  bool planned_windows() const { return speculative() && (auto_window || auto_tree); }
  Exactness exactness() const;
  // No relaxation: the output is the model's own decoding (sampled or greedy).
  bool lossless() const { return exactness() != Exactness::kLossy; }
  // e.g. "sjd-pac (L=auto, K=auto, D=auto, init=random) [exact]",
  //      "sjd (L=auto, init=random, relax=cool, delta=1.1, nu=0.7) [LOSSY]", "jacobi (L=16, init=random) [greedy]"
  std::string describe() const;
};

// The method names --method accepts, in help order.
const std::vector<std::string>& method_names();

// Builds the method's fixed pieces from its name (aliases: pac-ac = scd-mc);
// throws std::invalid_argument naming an unknown method.
MethodConfig make_method(const std::string& name);

InitScheme parse_init_scheme(const std::string& name);
std::string init_scheme_name(InitScheme scheme);

}  // namespace sjd::decoding
