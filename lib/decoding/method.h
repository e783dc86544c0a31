#pragma once
// A decoding method is three choices over one generation loop:
//   drafting     how window positions get their drafts (initialisation of new
//                positions; how kept tail drafts are re-coupled; proactive tree)
//   verification first-rejection stop, or continuation past it; single draft or
//                multi-candidate (tree levels)
//   relaxation   the acceptance test (exact, or a lossy relaxation)
#include <string>
#include <vector>

#include "sampling/relaxation.h"

namespace sjd::decoding {

enum class InitScheme { kRandom, kRepeatLeft, kRepeatUp, kSampleLeft, kSampleUp };

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
  bool continuation = false;   // verify past the first rejection (adaptive continuation)
  bool proactive_tree = false; // SJD-PAC proactive drafting after a rejection
  int pd_k = 4;                // candidates per tree depth
  int pd_depth = 3;            // tree depth D
  bool auto_window = false;    // choose L before each step (decoding/window_planner.h); `window` is then unused
  bool auto_tree = false;      // sjd-pac: choose K and D before each tree window; pd_k/pd_depth unused
  bool greedy = false;         // jacobi decodes with temperature 0
  sampling::Relaxation relax;

  bool speculative() const { return name != "ar"; }
  bool lossless() const { return relax.lossless() && !(name == "jacobi" && !greedy); }
  std::string describe() const;  // e.g. "sjd-pac (L=auto, K=auto, D=auto, init=random, relax=none)"
};

// The method names --method accepts, in help order.
const std::vector<std::string>& method_names();

// Builds the method's fixed pieces from its name (aliases: pac-ac = scd-mc);
// throws std::invalid_argument naming an unknown method.
MethodConfig make_method(const std::string& name);

InitScheme parse_init_scheme(const std::string& name);
std::string init_scheme_name(InitScheme scheme);

}  // namespace sjd::decoding
