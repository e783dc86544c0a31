#pragma once
// How the acceptance test may be relaxed (lossy), in one place for every verifier.
//   none     accept min(1, p(x)/q(x))                      -- exact
//   uniform  accept min(1, delta p(x)/q(x))                -- UniformRSD
//   cool     accept min(1, w_i p(x)/q(x)), w_i = delta exp(-nu i - mu),
//            mu such that sum_{i=1..L} exp(-nu i - mu) = L  -- Cool-SD (paper 002)
//   lantern  accept min(1, sum_{y in A(x)} p(y) / q(x)), A(x) the latent
//            neighbours of x whose extra mass stays below lambda p(x) -- LANTERN++
// On rejection the residual is Cool-SD's optimal G* = Norm(max(p - q f, 0)) with
// f(y) = min(1, score(y)/q(y)), or for lantern optionally LANTERN's own
// Norm(max(P_A - q, 0)). With none this is the usual Norm(max(p - q, 0)).
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace sjd::sampling {

enum class RelaxKind { kNone, kUniform, kCool, kLantern };

struct Relaxation {
  RelaxKind kind = RelaxKind::kNone;
  double delta = 1.1;
  double nu = 0.7;
  int lantern_k = 10;
  double lantern_lambda = 2.0;
  bool lantern_own_residual = false;
  // For lantern: int64 [V, k] neighbour token ids ordered by latent distance,
  // nearest first (row v lists v's neighbours, excluding v; -1 pads).
  at::Tensor neighbours;

  // Whether the relaxed test still samples p exactly: none, or a relaxation whose every weight is at most 1.
  // Accepting with min(1, w p / q) and resampling from max(p - min(q, w p), 0) gives min(q, w p) + p -
  // min(q, w p) = p when w <= 1 (it only accepts less than the plain test); so uniform at delta <= 1, Cool-SD
  // at delta <= 1 without decay (nu = 0: every weight is delta; with decay its first weight passes 1 in long
  // windows), and LANTERN with no neighbour to add (lambda <= 0 or k = 0). tests/decoding/test_lossy.cpp.
  bool lossless() const;
};

RelaxKind parse_relax_kind(const std::string& name);  // throws std::invalid_argument naming the value
const std::vector<std::string>& relax_kind_names();  // "none", "uniform", "cool", "lantern"
std::string relax_kind_name(RelaxKind kind);

// The weight w_i for window position i (1-based) of a window of `window` positions.
double relaxation_weight(const Relaxation& relax, int position, int window);

// score(x): the relaxed target mass the acceptance test compares with q(x). A token
// p is certain of (p(x) = 1: a forced structure token) scores at least 1 under
// every relaxation: a weight below 1 (Cool-SD's later positions) must not make a
// certainty a coin flip that stops the window (the residual would commit the
// same token). docs/methods.md: structure tokens always pass.
double relaxed_score(const Relaxation& relax, const float* p, int64_t token, double weight);

// Residual weights (unnormalised) written to out[0..n).
void relaxed_residual(const Relaxation& relax, const float* p, const float* q, int64_t n, int64_t draft,
                      double weight, float* out);

// LANTERN neighbourhoods from a codebook's latent vectors: for each image code,
// its k nearest other codes by L2 distance, as token ids (code + first_token_id),
// in a [vocab, k] table (rows of non-image tokens are -1).
at::Tensor lantern_neighbours(const at::Tensor& codebook, int k, int64_t first_token_id, int64_t vocab);

}  // namespace sjd::sampling
