// parse_vq_config: the bundle's `vq` object -> VQConfig, with errors that name
// the key so a user can fix bundle.json without reading the code.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "vq/vq_decoder.h"
#include "io/json_fields.h"

namespace sjd::vq {
namespace {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, const std::string& where) : j_(j), where_(where) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw std::invalid_argument(where_ + "." + key + ": " + problem);
  }

  const nlohmann::json& required(const std::string& key) const {
    auto it = j_.find(key);
    if (it == j_.end()) fail(key, "missing");
    return *it;
  }

  int64_t positive_int(const std::string& key) const { return io::required_integer(j_, key, where_, 1); }

  std::vector<int64_t> positive_ints(const std::string& key, bool allow_empty) const {
    const auto& v = required(key);
    if (!v.is_array()) fail(key, "expected an array of positive integers, found " + v.dump());
    if (v.empty() && !allow_empty) fail(key, "must not be empty");
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer() || v[i].get<int64_t>() <= 0)
        fail(key + "[" + std::to_string(i) + "]", "expected a positive integer, found " + v[i].dump());
      out.push_back(v[i].get<int64_t>());
    }
    return out;
  }

  std::string string(const std::string& key) const {
    const auto& v = required(key);
    if (!v.is_string()) fail(key, "expected a string, found " + v.dump());
    return v.get<std::string>();
  }

 private:
  const nlohmann::json& j_;
  const std::string& where_;
};

}  // namespace

namespace {
const std::vector<std::string> kDecoderKinds = {"chameleon-vqgan", "movq", "vq16"};
}  // namespace

std::string known_vq_decoder_kinds() {
  std::string known;
  for (const std::string& kind : kDecoderKinds) known += (known.empty() ? "" : ", ") + kind;
  return known;
}

VQConfig parse_vq_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object, found " + j.dump());
  static const std::set<std::string> known = {
      "kind", "weights", "codebook_size", "embed_dim", "z_channels", "ch", "ch_mult", "num_res_blocks",
      "attn_resolutions", "out_channels", "downsample", "resolution"};
  ConfigReader reader(j, where);
  // Other kinds add their own keys (read from `raw` by their decoders, which check them).
  if (j.contains("kind") && j["kind"] == "chameleon-vqgan") {
    for (const auto& item : j.items())
      if (!known.count(item.key())) reader.fail(item.key(), "unknown key");
  }

  VQConfig c;
  c.raw = j;
  c.where = where;
  c.kind = reader.string("kind");
  if (std::find(kDecoderKinds.begin(), kDecoderKinds.end(), c.kind) == kDecoderKinds.end()) {
    reader.fail("kind", "unknown VQ decoder \"" + c.kind + "\" (known: " + known_vq_decoder_kinds() + ")");
  }
  c.codebook_size = reader.positive_int("codebook_size");
  c.embed_dim = reader.positive_int("embed_dim");
  c.z_channels = reader.positive_int("z_channels");
  c.ch = reader.positive_int("ch");
  c.ch_mult = reader.positive_ints("ch_mult", /*allow_empty=*/false);
  c.num_res_blocks = reader.positive_int("num_res_blocks");
  c.attn_resolutions = reader.positive_ints("attn_resolutions", /*allow_empty=*/true);
  c.out_channels = reader.positive_int("out_channels");
  c.downsample = reader.positive_int("downsample");

  // Each level but the lowest doubles the side, so the factor is fixed by ch_mult (real decoders have 4 or 5
  // levels; more than 16 would upsample a code 2^16 times, and past 64 the shift is undefined).
  if (c.ch_mult.size() > 16) reader.fail("ch_mult", "has " + std::to_string(c.ch_mult.size()) + " levels (at most 16)");
  const int64_t implied = int64_t{1} << (c.ch_mult.size() - 1);
  if (c.downsample != implied)
    reader.fail("downsample", "is " + std::to_string(c.downsample) + " but ch_mult has " +
                                  std::to_string(c.ch_mult.size()) + " levels, which upsample by " +
                                  std::to_string(implied));
  // `resolution` only places attention blocks, so it is needed exactly when
  // some are asked for.
  if (j.contains("resolution")) {
    c.resolution = reader.positive_int("resolution");
    if (c.resolution % c.downsample != 0)
      reader.fail("resolution", "must be a multiple of downsample (" + std::to_string(c.downsample) + ")");
  } else if (!c.attn_resolutions.empty()) {
    reader.fail("resolution", "missing (needed to place the blocks listed in attn_resolutions)");
  }
  // Taming silently ignores a listed side that no level has; here it is
  // almost certainly a typo, and it would drop the checkpoint's attn tensors.
  for (size_t i = 0; i < c.attn_resolutions.size(); ++i) {
    bool found = false;
    std::string sides;
    for (size_t level = 0; level < c.ch_mult.size(); ++level) {
      const int64_t side = c.resolution >> level;
      found = found || side == c.attn_resolutions[i];
      sides += (level ? ", " : "") + std::to_string(side);
    }
    if (!found)
      reader.fail("attn_resolutions[" + std::to_string(i) + "]",
                  std::to_string(c.attn_resolutions[i]) + " is not the side of any level (" + sides + ")");
  }
  return c;
}

}  // namespace sjd::vq
