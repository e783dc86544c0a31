#pragma once
// Deliberately wrong variants of the decoding pieces. Only the exactness tests
// switch them on: each is a known way to lose losslessness (several are bugs
// of public implementations), kept so the tests prove they can fail. They
// exist on the CPU only: a decode with any of them verifies there.
#include "sampling/rejection.h"

namespace sjd::decoding {

struct Mutants {
  bool stale_q = false;               // keep the old q for continued (coupled) tail tokens
  bool longest_sibling = false;       // pick the sibling with the longest accepted path, not the first accepted
  bool one_hot_random_init = false;   // record q = one-hot for a uniformly drawn initial token
  bool uniform_stale_q = false;       // sample-up/left: record q = uniform for a draft drawn from a stale p
  sampling::Mutant candidates = sampling::Mutant::kNone;  // e.g. skip residual renormalisation
  bool peeking_window = false;        // end the window before the first draft whose coming accept draw is >= 0.5
  bool relaxed_coupling = false;      // couple the next drafts with the method's relaxation (first weight), q still p
  bool window_wide_accept = false;    // every chain position's accept uniform from the window's first position
  bool shared_gumbel = false;         // scd-gs: one Gumbel noise for every position, not one per position

  bool any() const {
    return stale_q || longest_sibling || one_hot_random_init || uniform_stale_q ||
           candidates != sampling::Mutant::kNone || peeking_window || relaxed_coupling || window_wide_accept ||
           shared_gumbel;
  }
};

}  // namespace sjd::decoding
