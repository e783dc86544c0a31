#include "decoding/method.h"

#include <sstream>
#include <stdexcept>

#include "text/closest_name.h"

namespace sjd::decoding {

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = {"ar", "jacobi", "sjd", "scd-mc", "pac-ac", "scd-gs", "sjd-pac"};
  return names;
}

MethodConfig make_method(const std::string& name) {
  MethodConfig m;
  m.name = name;
  if (name == "ar") {
    m.window = 0;
  } else if (name == "jacobi") {
    m.tail = TailUpdate::kGreedy;
    m.greedy = true;
  } else if (name == "sjd") {
    m.tail = TailUpdate::kResample;
  } else if (name == "scd-mc" || name == "pac-ac") {
    // Maximal coupling and SJD-PAC's adaptive continuation are one computation.
    m.name = "scd-mc";
    m.tail = TailUpdate::kMaximalCoupling;
  } else if (name == "scd-gs") {
    m.tail = TailUpdate::kGumbelShared;
  } else if (name == "sjd-pac") {
    m.tail = TailUpdate::kMaximalCoupling;
    m.proactive_tree = true;
    m.window = 64;  // the paper's default L
  } else {
    throw std::invalid_argument(text::unknown_name_message("method", name, method_names()));
  }
  return m;
}

InitScheme parse_init_scheme(const std::string& name) {
  if (name == "random") return InitScheme::kRandom;
  if (name == "repeat-left") return InitScheme::kRepeatLeft;
  if (name == "repeat-up") return InitScheme::kRepeatUp;
  if (name == "sample-left") return InitScheme::kSampleLeft;
  if (name == "sample-up") return InitScheme::kSampleUp;
  throw std::invalid_argument(
      text::unknown_name_message("init scheme", name,
                                 {"random", "repeat-left", "repeat-up", "sample-left", "sample-up"}));
}

std::string init_scheme_name(InitScheme scheme) {
  switch (scheme) {
    case InitScheme::kRandom: return "random";
    case InitScheme::kRepeatLeft: return "repeat-left";
    case InitScheme::kRepeatUp: return "repeat-up";
    case InitScheme::kSampleLeft: return "sample-left";
    case InitScheme::kSampleUp: return "sample-up";
  }
  return "?";
}

std::string exactness_name(Exactness exactness) {
  switch (exactness) {
    case Exactness::kExact: return "exact";
    case Exactness::kGreedy: return "greedy";
    case Exactness::kLossy: return "lossy";
  }
  return "?";
}

Exactness MethodConfig::exactness() const {
  // Greedy first: at temperature 0 p is exactly 1 on the argmax and 0 elsewhere, so every relaxation accepts
  // and resamples exactly as the lossless test does (a score of p = 1 is at least 1 under each of them).
  if (greedy) return Exactness::kGreedy;
  return relax.lossless() ? Exactness::kExact : Exactness::kLossy;
}

std::string MethodConfig::describe() const {
  std::ostringstream out;
  out << name;
  if (speculative()) {
    out << " (L=" << (auto_window ? "auto" : std::to_string(window));
    if (proactive_tree && auto_tree) out << ", K=auto, D=auto";
    if (proactive_tree && !auto_tree) out << ", K=" << pd_k << ", D=" << pd_depth;
    out << ", init=" << init_scheme_name(init);
    if (relax.kind != sampling::RelaxKind::kNone) out << ", relax=" << sampling::relax_kind_name(relax.kind);
    if (relax.kind == sampling::RelaxKind::kUniform || relax.kind == sampling::RelaxKind::kCool) {
      out << ", delta=" << relax.delta;
      if (relax.kind == sampling::RelaxKind::kCool) out << ", nu=" << relax.nu;
    }
    if (relax.kind == sampling::RelaxKind::kLantern) {
      out << ", k=" << relax.lantern_k << ", lambda=" << relax.lantern_lambda;
      if (relax.lantern_own_residual) out << ", own residual";
    }
    out << ")";
  }
  out << (exactness() == Exactness::kLossy ? " [LOSSY]" : " [" + exactness_name(exactness()) + "]");
  return out.str();
}

}  // namespace sjd::decoding
