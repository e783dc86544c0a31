#include "sampling/relaxation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace sjd::sampling {

RelaxKind parse_relax_kind(const std::string& name) {
  if (name == "none") return RelaxKind::kNone;
  if (name == "uniform") return RelaxKind::kUniform;
  if (name == "cool") return RelaxKind::kCool;
  if (name == "lantern") return RelaxKind::kLantern;
  throw std::invalid_argument("unknown relaxation '" + name + "' (expected none, uniform, cool or lantern)");
}

const std::vector<std::string>& relax_kind_names() {
  static const std::vector<std::string> names = {"none", "uniform", "cool", "lantern"};
  return names;
}

std::string relax_kind_name(RelaxKind kind) {
  switch (kind) {
    case RelaxKind::kNone: return "none";
    case RelaxKind::kUniform: return "uniform";
    case RelaxKind::kCool: return "cool";
    case RelaxKind::kLantern: return "lantern";
  }
  return "?";
}

bool Relaxation::lossless() const {
  switch (kind) {
    case RelaxKind::kNone: return true;
    case RelaxKind::kUniform: return delta <= 1.0;
    case RelaxKind::kCool: return delta <= 1.0 && nu == 0.0;
    case RelaxKind::kLantern: return lantern_lambda <= 0.0 || lantern_k <= 0;
  }
  return false;
}

double relaxation_weight(const Relaxation& relax, int position, int window) {
  switch (relax.kind) {
    case RelaxKind::kNone:
    case RelaxKind::kLantern:
      return 1.0;
    case RelaxKind::kUniform:
      return relax.delta;
    case RelaxKind::kCool: {
      // exp(-mu) = L / sum_i exp(-nu i): the schedule averages to delta over the window.
      double norm = 0.0;
      for (int i = 1; i <= window; ++i) norm += std::exp(-relax.nu * i);
      return relax.delta * std::exp(-relax.nu * position) * window / norm;
    }
  }
  return 1.0;
}

namespace {

// LANTERN's A(x) without x: the nearest neighbours of x, taken in order
// while their added mass stays below lambda * p(x).
std::vector<int64_t> lantern_extra(const Relaxation& relax, const float* p, int64_t token) {
  std::vector<int64_t> extra_tokens;
  if (!relax.neighbours.defined() || token >= relax.neighbours.size(0)) return extra_tokens;
  const int64_t* row = relax.neighbours.data_ptr<int64_t>() + token * relax.neighbours.size(1);
  const int k = std::min<int>(relax.lantern_k, static_cast<int>(relax.neighbours.size(1)));
  double extra = 0.0;
  for (int j = 0; j < k && row[j] >= 0; ++j) {
    if (extra + p[row[j]] >= relax.lantern_lambda * p[token]) break;
    extra += p[row[j]];
    extra_tokens.push_back(row[j]);
  }
  return extra_tokens;
}

double lantern_mass(const Relaxation& relax, const float* p, int64_t token) {
  double mass = p[token];
  for (int64_t y : lantern_extra(relax, p, token)) mass += p[y];
  return mass;
}

}  // namespace

double relaxed_score(const Relaxation& relax, const float* p, int64_t token, double weight) {
  if (relax.kind == RelaxKind::kLantern) return lantern_mass(relax, p, token);
  if (p[token] >= 1.0f) return std::max(1.0, weight * p[token]);
  return weight * p[token];
}

void relaxed_residual(const Relaxation& relax, const float* p, const float* q, int64_t n, int64_t draft,
                      double weight, float* out) {
  if (relax.kind == RelaxKind::kNone) {
    for (int64_t v = 0; v < n; ++v) out[v] = std::max(p[v] - q[v], 0.0f);
    return;
  }
  if (relax.kind == RelaxKind::kLantern && relax.lantern_own_residual) {
    // Norm(max(P_A - q, 0)): the draft's neighbourhood mass is moved onto the draft.
    std::vector<float> moved(p, p + n);
    moved[draft] = static_cast<float>(lantern_mass(relax, p, draft));
    for (int64_t y : lantern_extra(relax, p, draft)) moved[y] = 0.0f;
    for (int64_t v = 0; v < n; ++v) out[v] = std::max(moved[v] - q[v], 0.0f);
    return;
  }
  // Cool-SD's G*: max(p - q * min(1, score/q), 0) = max(p - min(q, score), 0).
  for (int64_t v = 0; v < n; ++v) {
    const double score = relaxed_score(relax, p, v, weight);
    out[v] = static_cast<float>(std::max(static_cast<double>(p[v]) - std::min<double>(q[v], score), 0.0));
  }
}

at::Tensor lantern_neighbours(const at::Tensor& codebook, int k, int64_t first_token_id, int64_t vocab) {
  const at::Tensor latents = codebook.to(at::kFloat).contiguous();
  const int64_t codes = latents.size(0);
  const int64_t keep = std::min<int64_t>(k, codes - 1);
  at::Tensor distances = at::cdist(latents, latents);
  distances.fill_diagonal_(std::numeric_limits<float>::infinity());
  const at::Tensor nearest = std::get<1>(distances.topk(keep, /*dim=*/1, /*largest=*/false, /*sorted=*/true));
  at::Tensor table = at::full({vocab, std::max<int64_t>(keep, 1)}, -1, at::kLong);
  table.slice(0, first_token_id, first_token_id + codes).slice(1, 0, keep).copy_(nearest + first_token_id);
  return table;
}

}  // namespace sjd::sampling
