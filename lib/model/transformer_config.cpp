#include "model/transformer_config.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace sjd::model {
namespace {

int64_t positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0) {
    throw std::invalid_argument(where + "." + key + ": expected a positive integer");
  }
  return j[key].get<int64_t>();
}

}  // namespace

TransformerConfig parse_transformer_config(const nlohmann::json& j, const std::string& where) {
  TransformerConfig c;
  c.vocab_size = positive(j, "vocab_size", where);
  c.hidden_size = positive(j, "hidden_size", where);
  c.num_layers = positive(j, "num_layers", where);
  c.num_heads = positive(j, "num_heads", where);
  c.num_kv_heads = j.contains("num_kv_heads") ? positive(j, "num_kv_heads", where) : c.num_heads;
  c.head_dim = j.contains("head_dim") ? positive(j, "head_dim", where) : c.hidden_size / c.num_heads;
  c.intermediate_size = positive(j, "intermediate_size", where);
  c.norm_eps = j.value("norm_eps", 1e-5);
  c.rope_theta = j.value("rope_theta", 10000.0);
  const std::string rope = j.value("rope", std::string("1d"));
  if (rope == "1d") {
    c.rope = RopeKind::k1d;
  } else if (rope == "2d") {
    c.rope = RopeKind::k2d;
  } else {
    throw std::invalid_argument(where + ".rope: expected \"1d\" or \"2d\", got \"" + rope + "\"");
  }
  c.qk_norm = j.value("qk_norm", false);
  c.qk_norm_eps = j.value("qk_norm_eps", 1e-5);
  const std::string style = j.value("key_style", std::string("hf"));
  if (style == "hf") {
    c.key_style = KeyStyle::kHf;
  } else if (style == "llamagen") {
    c.key_style = KeyStyle::kLlamaGen;
  } else {
    throw std::invalid_argument(where + ".key_style: expected \"hf\" or \"llamagen\", got \"" + style + "\"");
  }
  c.grid_width = j.value("grid_width", int64_t{0});
  c.caption_length = j.value("caption_length", int64_t{0});
  if (c.num_heads % c.num_kv_heads != 0) {
    throw std::invalid_argument(where + ": num_heads must be a multiple of num_kv_heads");
  }
  if (c.head_dim % 2 != 0) throw std::invalid_argument(where + ".head_dim: must be even for RoPE");
  return c;
}

}  // namespace sjd::model
