#include "vq/chameleon_vqgan.h"

#include <c10/core/InferenceMode.h>

#include <stdexcept>
#include <string>

namespace sjd::vq {
namespace {

constexpr int64_t kGroupNormGroups = 32;

void check_architecture(const VQConfig& c) {
  if (c.out_channels != 3)
    throw std::invalid_argument(
        "vq.out_channels: the chameleon-vqgan decoder writes RGB images, so it must be 3, not " +
        std::to_string(c.out_channels));
  for (size_t level = 0; level < c.ch_mult.size(); ++level) {
    const int64_t channels = c.ch * c.ch_mult[level];
    if (channels % kGroupNormGroups != 0)
      throw std::invalid_argument("vq.ch * vq.ch_mult[" + std::to_string(level) + "] = " + std::to_string(channels) +
                                  " channels: GroupNorm needs a multiple of 32");
  }
}

bool has_attention(const VQConfig& c, size_t level) {
  if (c.attn_resolutions.empty()) return false;
  const int64_t side = c.resolution >> level;  // taming: training side at this level
  for (int64_t r : c.attn_resolutions)
    if (r == side) return true;
  return false;
}

}  // namespace

ChameleonVQGAN::ChameleonVQGAN(const VQConfig& config, const io::WeightMap& w) : config_(config) {
  check_architecture(config);
  const auto& c = config_;
  codebook_ = load_float(w, "quantize.embedding.weight", {c.codebook_size, c.embed_dim});
  post_quant_conv_ = Conv2d::load(w, "post_quant_conv", c.embed_dim, c.z_channels, 1);

  const size_t num_levels = c.ch_mult.size();
  int64_t channels = c.ch * c.ch_mult.back();  // the lowest resolution's width
  conv_in_ = Conv2d::load(w, "decoder.conv_in", c.z_channels, channels, 3);
  mid_block_1_ = ResnetBlock::load(w, "decoder.mid.block_1", channels, channels);
  mid_attn_1_ = AttnBlock::load(w, "decoder.mid.attn_1", channels);
  mid_block_2_ = ResnetBlock::load(w, "decoder.mid.block_2", channels, channels);

  // Built in execution order (highest level first), stored by level index so
  // levels_[i] is `decoder.up.{i}`.
  levels_.resize(num_levels);
  for (size_t level = num_levels; level-- > 0;) {
    const std::string prefix = "decoder.up." + std::to_string(level);
    const int64_t out = c.ch * c.ch_mult[level];
    Level& l = levels_[level];
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      l.blocks.push_back(ResnetBlock::load(w, prefix + ".block." + std::to_string(j), channels, out));
      channels = out;
      if (has_attention(c, level)) l.attns.push_back(AttnBlock::load(w, prefix + ".attn." + std::to_string(j), out));
    }
    if (level != 0) l.upsample = Upsample::load(w, prefix + ".upsample", out);
  }
  norm_out_ = GroupNorm::load(w, "decoder.norm_out", channels);
  conv_out_ = Conv2d::load(w, "decoder.conv_out", channels, c.out_channels, 3);
}

at::Tensor ChameleonVQGAN::lookup(const at::Tensor& codes) const {
  return codebook_rows(codebook_, codes, "chameleon-vqgan").unsqueeze(0).permute({0, 3, 1, 2}).contiguous();
}

at::Tensor ChameleonVQGAN::decode_float(const at::Tensor& codes) const {
  c10::InferenceMode inference;
  at::Tensor h = conv_in_(post_quant_conv_(lookup(codes)));
  h = mid_block_2_(mid_attn_1_(mid_block_1_(h)));
  for (size_t level = levels_.size(); level-- > 0;) {
    const Level& l = levels_[level];
    for (size_t j = 0; j < l.blocks.size(); ++j) {
      h = l.blocks[j](h);
      if (!l.attns.empty()) h = l.attns[j](h);
    }
    if (l.upsample) h = (*l.upsample)(h);
  }
  return conv_out_(swish(norm_out_(h)))[0];
}

}  // namespace sjd::vq
