#include "model/transformer_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include "io/json_fields.h"

namespace sjd::model {
namespace {

// Past any real model (Emu3's vocabulary is 184622, the widest MLP a few tens of thousands): sizes
// beyond it are a broken file, refused before anything is allocated per entry (the family's token
// masks are built from vocab_size before the weights are read).
constexpr int64_t kLargestSize = int64_t{1} << 24;

int64_t positive(const nlohmann::json& j, const char* key, const std::string& where) {
  return io::required_integer(j, key, where, 1, kLargestSize);
}

// A positive finite number (norm epsilons, the RoPE base): 0, a negative value or
// 1e999 would make every hidden state NaN.
double positive_number(const nlohmann::json& j, const char* key, double fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const double value = j[key].is_number() ? j[key].get<double>() : 0.0;
  if (!j[key].is_number() || !std::isfinite(value) || value <= 0.0) {
    throw std::invalid_argument(where + "." + key + ": expected a positive finite number, found " + j[key].dump());
  }
  return value;
}

template <typename T>
T typed(const nlohmann::json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(where + "." + key + ": wrong type (" + j[key].dump() + ")");
  }
}

}  // namespace

TransformerConfig parse_transformer_config(const nlohmann::json& j, const std::string& where) {
  TransformerConfig c;
  c.vocab_size = positive(j, "vocab_size", where);
  c.hidden_size = positive(j, "hidden_size", where);
  c.num_layers = positive(j, "num_layers", where);
  c.num_heads = positive(j, "num_heads", where);
  c.num_kv_heads = io::optional_integer(j, "num_kv_heads", where, c.num_heads, 1, kLargestSize);
  c.head_dim = io::optional_integer(j, "head_dim", where, c.hidden_size / c.num_heads, 1, kLargestSize);
  c.intermediate_size = positive(j, "intermediate_size", where);
  c.norm_eps = positive_number(j, "norm_eps", 1e-5, where);
  c.rope_theta = positive_number(j, "rope_theta", 10000.0, where);
  const std::string rope = typed(j, "rope", std::string("1d"), where);
  if (rope == "1d") {
    c.rope = RopeKind::k1d;
  } else if (rope == "2d") {
    c.rope = RopeKind::k2d;
  } else {
    throw std::invalid_argument(where + ".rope: expected \"1d\" or \"2d\", got \"" + rope + "\"");
  }
  c.qk_norm = typed(j, "qk_norm", false, where);
  c.qk_norm_eps = positive_number(j, "qk_norm_eps", 1e-5, where);
  const std::string style = typed(j, "key_style", std::string("hf"), where);
  if (style == "hf") {
    c.key_style = KeyStyle::kHf;
  } else if (style == "llamagen") {
    c.key_style = KeyStyle::kLlamaGen;
  } else {
    throw std::invalid_argument(where + ".key_style: expected \"hf\" or \"llamagen\", got \"" + style + "\"");
  }
  c.grid_width = io::optional_integer(j, "grid_width", where, 0, 0, kLargestSize);
  c.caption_length = io::optional_integer(j, "caption_length", where, 0, 0, kLargestSize);
  if (c.num_heads % c.num_kv_heads != 0) {
    throw std::invalid_argument(where + ": num_heads must be a multiple of num_kv_heads");
  }
  if (c.head_dim % 2 != 0) throw std::invalid_argument(where + ".head_dim: must be even for RoPE");
  return c;
}

}  // namespace sjd::model
