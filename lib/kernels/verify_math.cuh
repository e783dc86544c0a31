#pragma once
// The per-token arithmetic of verification, shared by the CUDA kernels and
// checked on the host against the CPU reference (sampling/rejection.cpp,
// sampling/relaxation.cpp, sampling/categorical.cpp). Every operation is done
// in the same precision and order as there, so that accept decisions and race
// winners agree exactly: float where the reference stores floats, double where
// it computes in double.
#include <cmath>
#include <cstdint>

#include "kernels/philox.cuh"

namespace sjd::kernels {

enum RelaxCode : int { kRelaxNone = 0, kRelaxUniform = 1, kRelaxCool = 2, kRelaxLantern = 3 };

// The acceptance relaxation, as plain numbers and device pointers.
struct RelaxArgs {
  int kind = kRelaxNone;
  const double* weights = nullptr;      // [depths]: relaxation_weight(depth + 1, window), device memory
  const int64_t* neighbours = nullptr;  // lantern: [neighbour_rows, neighbour_cols], nearest first, -1 pads
  int64_t neighbour_rows = 0;
  int64_t neighbour_cols = 0;
  int lantern_k = 0;
  double lantern_lambda = 0.0;
  bool lantern_own_residual = false;
};

// Most neighbours one LANTERN neighbourhood may hold in a kernel's shared memory.
constexpr int kMaxLanternNeighbours = 64;

// LANTERN's A(x) without x: nearest neighbours of `token` taken while their
// added mass stays below lambda p(token). Writes them to `extra` and returns
// how many; `mass` gets p(token) plus theirs (double, as the reference sums).
SJD_HOST_DEVICE int lantern_extras(const RelaxArgs& r, const float* p, int64_t token, int64_t* extra, double* mass) {
  int count = 0;
  double added = 0.0;             // the neighbours' mass, for the lambda test
  double total = p[token];        // p(token) first, then each neighbour: the reference's order
  if (r.neighbours != nullptr && token < r.neighbour_rows) {
    const int64_t* row = r.neighbours + token * r.neighbour_cols;
    const int k = r.lantern_k < r.neighbour_cols ? r.lantern_k : static_cast<int>(r.neighbour_cols);
    for (int j = 0; j < k && j < kMaxLanternNeighbours && row[j] >= 0; ++j) {
      if (added + p[row[j]] >= r.lantern_lambda * p[token]) break;
      added += p[row[j]];
      total += p[row[j]];
      extra[count++] = row[j];
    }
  }
  *mass = total;
  return count;
}

// score(x): the relaxed target mass the acceptance test compares with q(x).
SJD_HOST_DEVICE double relaxed_score(const RelaxArgs& r, const float* p, int64_t token, double weight) {
  if (r.kind == kRelaxLantern) {
    int64_t extra[kMaxLanternNeighbours];
    double mass = 0.0;
    lantern_extras(r, p, token, extra, &mass);
    return mass;
  }
  if (p[token] >= 1.0f) {  // a certain token passes under every weight (the reference's rule)
    const double weighted = weight * p[token];
    return weighted > 1.0 ? weighted : 1.0;
  }
  return weight * p[token];
}

// Accept with probability min(1, score / q(draft)); a draft with q == 0 cannot
// have been drawn from q and is rejected. `u` is the kAccept stream's index 0.
SJD_HOST_DEVICE bool accept_draft(double score, float q_draft, double u) {
  if (!(static_cast<double>(q_draft) > 0.0)) return false;
  const double ratio = score / static_cast<double>(q_draft);
  return ratio >= 1.0 || u < ratio;
}

// The draft's own LANTERN neighbourhood, for the optional LANTERN residual
// Norm(max(P_A - q, 0)) that moves the neighbourhood's mass onto the draft.
// No member initialisers: kernels keep it in shared memory (count 0: unused).
struct DraftNeighbourhood {
  int64_t draft;
  double mass;
  int count;
  int64_t extra[kMaxLanternNeighbours];
};

// Unnormalised residual weight of token v (sampling::relaxed_residual).
// `q_v` is q(v) as the reference holds it (a float).
SJD_HOST_DEVICE float residual_weight(const RelaxArgs& r, const float* p, float q_v, int64_t v, double weight,
                                      const DraftNeighbourhood& own) {
  if (r.kind == kRelaxNone) {
    const float d = p[v] - q_v;
    return d > 0.0f ? d : 0.0f;
  }
  if (r.kind == kRelaxLantern && r.lantern_own_residual) {
    float moved = p[v];
    if (v == own.draft) moved = static_cast<float>(own.mass);
    for (int j = 0; j < own.count; ++j) {
      if (own.extra[j] == v) moved = 0.0f;
    }
    const float d = moved - q_v;
    return d > 0.0f ? d : 0.0f;
  }
  // Cool-SD's G*: max(p - min(q, score), 0), in double as the reference.
  const double score = relaxed_score(r, p, v, weight);
  const double q = static_cast<double>(q_v);
  const double d = static_cast<double>(p[v]) - (q < score ? q : score);
  return static_cast<float>(d > 0.0 ? d : 0.0);
}

// One contestant of the exponential race: w / E with E = -log U.
SJD_HOST_DEVICE double race_score(float w, uint32_t bits) {
  return static_cast<double>(w) / -log(philox_open_unit(bits));
}

}  // namespace sjd::kernels
