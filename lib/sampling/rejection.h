#pragma once
// The two verification primitives every speculative method is built from:
//  - modified rejection sampling of one draft (MRS), and
//  - recursive rejection sampling of several candidates drawn without
//    replacement (SJD-PAC appendix A.3).
// Both take probability rows (the logits pipeline's output), the draft
// distribution q the draft(s) were drawn from, and Philox keys, and return the
// token to commit. With Relaxation::kNone the committed token is exactly
// distributed as p.
#include <cstdint>
#include <vector>

#include "sampling/philox.h"
#include "sampling/relaxation.h"

namespace sjd::sampling {

struct VerifyOutcome {
  bool accepted = false;  // a draft (or one of the candidates) was accepted
  int candidate = -1;     // which candidate (0-based) was accepted, -1 if none
  int64_t token = -1;     // the token committed at this position
};

// The random streams of one verified position: `accept` for the uniforms,
// `residual` for the draw on rejection; sub-streams separate sibling attempts.
struct VerifyKeys {
  RngKey accept;
  RngKey residual;
};

// Which deliberately wrong variant to run. Only tests set this: each mutant is
// a known way to lose exactness, kept so the exactness tests prove their power.
// kAssumeUnitDraftMass takes q's row to sum to exactly 1, as the tree verifier did
// until 2026-11-28 (q^(k) = q / (1 - sum of the tried candidates' q)).
enum class Mutant { kNone, kSkipResidualRenormalisation, kAssumeUnitDraftMass };

// MRS(p, q, x): accept x with probability min(1, score(x)/q(x)), else draw from
// the residual. `weight` is the relaxation weight of this window position.
// scratch must hold n floats.
VerifyOutcome verify_draft(const float* p, const float* q, int64_t n, int64_t draft, const Relaxation& relax,
                           double weight, const VerifyKeys& keys, float* scratch);

// Candidates c_1..c_K drawn without replacement from q: try c_k against the
// running residual target p^(k) with q^(k) = q without c_<k renormalised (by the
// mass the row itself has left, never by 1 minus the tried q); on
// rejection p^(k+1) = Norm(max(p^(k) - q^(k), 0)); the first accepted candidate
// wins; if all fail, draw from p^(K+1).
VerifyOutcome verify_candidates(const float* p, const float* q, int64_t n, const std::vector<int64_t>& candidates,
                                const Relaxation& relax, double weight, const VerifyKeys& keys,
                                Mutant mutant = Mutant::kNone);

}  // namespace sjd::sampling
