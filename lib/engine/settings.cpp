#include "engine/settings.h"

#include <stdexcept>

namespace sjd::engine {
namespace {

template <typename T>
void read(const nlohmann::json& layer, const char* key, T& out, const std::string& where) {
  if (!layer.contains(key)) return;
  try {
    out = layer.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(where + ": /" + key + ": wrong type (" + layer.at(key).dump() + ")");
  }
}

}  // namespace

void apply_settings(GenerationSettings& s, const nlohmann::json& layer, const std::string& where) {
  if (!layer.is_object()) throw std::invalid_argument(where + ": expected a JSON object of settings");
  static const std::vector<std::string> known = {
      "method", "window", "init", "pd_k", "pd_depth", "relax", "delta", "nu", "lantern_k", "lantern_lambda",
      "lantern_own_residual", "cfg", "temperature", "top_k", "seed", "resolution", "device", "dtype"};
  for (const auto& item : layer.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      throw std::invalid_argument(where + ": /" + item.key() + ": unknown key");
    }
  }
  read(layer, "method", s.method, where);
  read(layer, "window", s.window, where);
  read(layer, "init", s.init, where);
  read(layer, "pd_k", s.pd_k, where);
  read(layer, "pd_depth", s.pd_depth, where);
  read(layer, "relax", s.relax, where);
  read(layer, "delta", s.delta, where);
  read(layer, "nu", s.nu, where);
  read(layer, "lantern_k", s.lantern_k, where);
  read(layer, "lantern_lambda", s.lantern_lambda, where);
  read(layer, "lantern_own_residual", s.lantern_own_residual, where);
  read(layer, "cfg", s.cfg, where);
  read(layer, "temperature", s.temperature, where);
  read(layer, "top_k", s.top_k, where);
  read(layer, "seed", s.seed, where);
  read(layer, "resolution", s.resolution, where);
  read(layer, "device", s.device, where);
  read(layer, "dtype", s.dtype, where);
}

nlohmann::json settings_to_json(const GenerationSettings& s) {
  return {{"method", s.method},   {"window", s.window},   {"init", s.init},
          {"pd_k", s.pd_k},       {"pd_depth", s.pd_depth}, {"relax", s.relax},
          {"delta", s.delta},     {"nu", s.nu},           {"lantern_k", s.lantern_k},
          {"lantern_lambda", s.lantern_lambda}, {"lantern_own_residual", s.lantern_own_residual},
          {"cfg", s.cfg},         {"temperature", s.temperature}, {"top_k", s.top_k},
          {"seed", s.seed},       {"resolution", s.resolution}, {"device", s.device}, {"dtype", s.dtype}};
}

decoding::MethodConfig method_from_settings(const GenerationSettings& s) {
  decoding::MethodConfig m = decoding::make_method(s.method);
  if (s.window < 0) throw std::invalid_argument("--window must be >= 1 (got " + std::to_string(s.window) + ")");
  if (s.window > 0 && m.speculative()) m.window = s.window;
  if (m.window == 0 && m.speculative()) m.window = 16;
  m.init = decoding::parse_init_scheme(s.init);
  if (s.pd_k < 1 || s.pd_depth < 0) throw std::invalid_argument("--pd-k must be >= 1 and --pd-depth >= 0");
  m.pd_k = s.pd_k;
  m.pd_depth = s.pd_depth;
  m.relax.kind = sampling::parse_relax_kind(s.relax);
  if (m.relax.kind != sampling::RelaxKind::kNone && !(m.name == "sjd" || m.name == "scd-mc" || m.name == "sjd-pac")) {
    throw std::invalid_argument("--relax " + s.relax + " applies to sjd, scd-mc and sjd-pac, not " + m.name);
  }
  m.relax.delta = s.delta;
  m.relax.nu = s.nu;
  m.relax.lantern_k = s.lantern_k;
  m.relax.lantern_lambda = s.lantern_lambda;
  m.relax.lantern_own_residual = s.lantern_own_residual;
  m.greedy = m.greedy || s.temperature <= 0.0;
  return m;
}

sampling::PipelineSettings pipeline_from_settings(const GenerationSettings& s, sampling::CfgMix mix, bool greedy) {
  sampling::PipelineSettings p;
  p.cfg_scale = s.cfg;
  p.cfg_mix = mix;
  p.temperature = greedy ? 0.0 : s.temperature;
  p.top_k = s.top_k;
  return p;
}

}  // namespace sjd::engine
