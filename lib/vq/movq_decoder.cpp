#include "vq/movq_decoder.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace sjd::vq {
namespace {

constexpr int64_t kGroupNormGroups = 32;

[[noreturn]] void fail(const std::string& key, const std::string& problem) {
  throw std::invalid_argument("vq." + key + ": " + problem);
}

}  // namespace

MovqConfig parse_movq_config(const VQConfig& c) {
  static const std::set<std::string> known = {
      "kind",           "weights",          "codebook_size",  "embed_dim",   "z_channels", "ch",
      "ch_mult",        "num_res_blocks",   "attn_resolutions", "out_channels", "downsample", "attn_levels",
      "temporal_downsample_factor"};
  for (const auto& item : c.raw.items()) {
    if (item.key() == "resolution") fail("resolution", "not used by movq (attention is placed by attn_levels)");
    if (!known.count(item.key())) fail(item.key(), "unknown key for vq.kind \"movq\"");
  }
  if (!c.attn_resolutions.empty())
    fail("attn_resolutions", "must be [] for movq: Emu3 places attention by level index, given as attn_levels");
  if (c.out_channels != 3) fail("out_channels", "the movq decoder writes RGB images, so it must be 3");
  if (c.embed_dim != c.z_channels)
    fail("z_channels", "must equal embed_dim (" + std::to_string(c.embed_dim) +
                           "): z and the codebook vectors share the temporal stack");
  for (size_t level = 0; level < c.ch_mult.size(); ++level) {
    if (c.ch * c.ch_mult[level] % kGroupNormGroups != 0)
      fail("ch_mult[" + std::to_string(level) + "]", "ch * ch_mult = " + std::to_string(c.ch * c.ch_mult[level]) +
                                                         " channels: GroupNorm needs a multiple of 32");
  }

  MovqConfig m;
  const nlohmann::json& levels = c.raw.contains("attn_levels") ? c.raw["attn_levels"] : nlohmann::json();
  if (!levels.is_array()) fail("attn_levels", "expected an array of level indices (release: [3])");
  for (size_t i = 0; i < levels.size(); ++i) {
    const auto& v = levels[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(c.ch_mult.size()))
      fail("attn_levels[" + std::to_string(i) + "]", "expected a level index 0.." +
                                                       std::to_string(c.ch_mult.size() - 1) + ", found " + v.dump());
    m.attn_levels.push_back(v.get<int64_t>());
  }
  const nlohmann::json& factor = c.raw.contains("temporal_downsample_factor") ? c.raw["temporal_downsample_factor"]
                                                                               : nlohmann::json();
  if (!factor.is_number_integer() || factor.get<int64_t>() < 1 ||
      (factor.get<int64_t>() & (factor.get<int64_t>() - 1)) != 0)
    fail("temporal_downsample_factor", "expected a power of two (release: 4), found " + factor.dump());
  m.temporal_downsample_factor = factor.get<int64_t>();
  return m;
}

MovqDecoder::MovqDecoder(const VQConfig& config, const io::WeightMap& w) : config_(config) {
  const MovqConfig movq = parse_movq_config(config);
  const auto& c = config_;
  const int64_t zq = c.embed_dim;
  codebook_ = load_float(w, "quantize.embedding.weight", {c.codebook_size, c.embed_dim});
  post_quant_conv_ = CausalConv3d::load(w, "post_quant_conv", c.embed_dim, c.z_channels, 3, 1, 1);
  for (int64_t i = 0; i < c.num_res_blocks; ++i)
    time_res_stack_.push_back(
        TemporalResnetBlock::load(w, "decoder.time_res_stack." + std::to_string(i), c.z_channels));
  for (int64_t i = 0, frames = 1; frames < movq.temporal_downsample_factor; ++i, frames *= 2)
    time_conv_.push_back(TemporalUpsample::load(w, "decoder.time_conv." + std::to_string(i), c.z_channels));

  const size_t num_levels = c.ch_mult.size();
  int64_t channels = c.ch * c.ch_mult.back();
  conv_in_ = Conv2d::load(w, "decoder.conv_in", c.z_channels, channels, 3);
  mid_block_1_ = SpatialResnetBlock::load(w, "decoder.mid.block_1", channels, channels, zq);
  mid_attn_1_ = SpatialAttnBlock::load(w, "decoder.mid.attn_1", channels, zq);
  mid_block_2_ = SpatialResnetBlock::load(w, "decoder.mid.block_2", channels, channels, zq);

  // Loaded in execution order (lowest resolution first), stored by level index.
  levels_.resize(num_levels);
  for (size_t level = num_levels; level-- > 0;) {
    const std::string prefix = "decoder.up." + std::to_string(level);
    const int64_t out = c.ch * c.ch_mult[level];
    const bool attention =
        std::count(movq.attn_levels.begin(), movq.attn_levels.end(), static_cast<int64_t>(level)) > 0;
    Level& l = levels_[level];
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      l.blocks.push_back(SpatialResnetBlock::load(w, prefix + ".block." + std::to_string(j), channels, out, zq));
      channels = out;
      if (attention) l.attns.push_back(SpatialAttnBlock::load(w, prefix + ".attn." + std::to_string(j), out, zq));
    }
    if (level != 0) l.upsample = Upsample::load(w, prefix + ".upsample", out);
  }
  norm_out_ = SpatialNorm::load(w, "decoder.norm_out", channels, zq);
  conv_out_ = Conv2d::load(w, "decoder.conv_out", channels, c.out_channels, 3);
}

at::Tensor MovqDecoder::lookup(const at::Tensor& codes) const {
  return codebook_rows(codebook_, codes, "movq").unsqueeze(0).unsqueeze(0).permute({0, 4, 1, 2, 3}).contiguous();
}

at::Tensor MovqDecoder::decode_float(const at::Tensor& codes) const {
  c10::InferenceMode inference;
  const at::Tensor quant = lookup(codes);
  // z (post_quant_conv) first, quant second, as the release stacks them.
  at::Tensor frames = at::cat({post_quant_conv_(quant), quant}, /*dim=*/0);
  for (const auto& block : time_res_stack_) frames = block(frames);
  for (const auto& upsample : time_conv_) frames = swish(upsample(frames));
  const at::Tensor first = frames.select(/*dim=*/2, 0);  // [2, C, H, W]
  const at::Tensor zq = first.narrow(0, 1, 1);
  at::Tensor h = conv_in_(first.narrow(0, 0, 1));

  h = mid_block_2_(mid_attn_1_(mid_block_1_(h, zq), zq), zq);
  for (size_t level = levels_.size(); level-- > 0;) {
    const Level& l = levels_[level];
    for (size_t j = 0; j < l.blocks.size(); ++j) {
      h = l.blocks[j](h, zq);
      if (!l.attns.empty()) h = l.attns[j](h, zq);
    }
    if (l.upsample) h = (*l.upsample)(h);
  }
  return conv_out_(swish(norm_out_(h, zq)))[0];
}

std::unique_ptr<VQDecoder> make_movq_decoder(const VQConfig& config, const io::WeightMap& weights) {
  return std::make_unique<MovqDecoder>(config, weights);
}

}  // namespace sjd::vq
