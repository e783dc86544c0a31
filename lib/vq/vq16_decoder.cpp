#include "vq/vq16_decoder.h"

#include <c10/core/InferenceMode.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "vq/taming_blocks.h"

namespace sjd::vq {
namespace {

constexpr int64_t kGroupNormGroups = 32;

// The vq16 keys of the bundle's `vq` object beyond the common ones.
bool read_l2_norm_flag(const VQConfig& c) {
  static const std::set<std::string> known = {
      "kind", "weights", "codebook_size", "embed_dim", "z_channels", "ch", "ch_mult", "num_res_blocks",
      "attn_resolutions", "out_channels", "downsample", "resolution", "codebook_l2_norm"};
  for (const auto& item : c.raw.items()) {
    if (!known.count(item.key())) throw std::invalid_argument("vq." + item.key() + ": unknown key for kind vq16");
  }
  if (!c.attn_resolutions.empty()) {
    throw std::invalid_argument(
        "vq.attn_resolutions: must be [] for kind vq16 (attention sits in decoder.mid.1 and decoder.conv_blocks.0 "
        "by architecture)");
  }
  if (c.out_channels != 3) {
    throw std::invalid_argument("vq.out_channels: the vq16 decoder writes RGB images, so it must be 3, not " +
                                std::to_string(c.out_channels));
  }
  for (size_t level = 0; level < c.ch_mult.size(); ++level) {
    const int64_t channels = c.ch * c.ch_mult[level];
    if (channels % kGroupNormGroups != 0) {
      throw std::invalid_argument("vq.ch * vq.ch_mult[" + std::to_string(level) + "] = " + std::to_string(channels) +
                                  " channels: GroupNorm needs a multiple of 32");
    }
  }
  if (!c.raw.contains("codebook_l2_norm")) return true;  // LlamaGen's VQ ModelArgs default
  const auto& flag = c.raw["codebook_l2_norm"];
  if (!flag.is_boolean()) {
    throw std::invalid_argument("vq.codebook_l2_norm: expected true or false, found " + flag.dump());
  }
  return flag.get<bool>();
}

class Vq16Decoder : public VQDecoder {
 public:
  Vq16Decoder(const VQConfig& config, const io::WeightMap& w) : config_(config) {
    const bool l2_norm = read_l2_norm_flag(config);
    const auto& c = config_;
    const at::Tensor raw = load_float(w, "quantize.embedding.weight", {c.codebook_size, c.embed_dim});
    // F.normalize(p=2, dim=-1): rows divided by max(norm, 1e-12).
    codebook_ = l2_norm ? (raw / raw.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12)).contiguous() : raw;
    post_quant_conv_ = Conv2d::load(w, "post_quant_conv", c.embed_dim, c.z_channels, 1);

    const int64_t levels = static_cast<int64_t>(c.ch_mult.size());
    int64_t channels = c.ch * c.ch_mult.back();
    conv_in_ = Conv2d::load(w, "decoder.conv_in", c.z_channels, channels, 3);
    mid_res_0_ = ResnetBlock::load(w, "decoder.mid.0", channels, channels);
    mid_attn_ = AttnBlock::load(w, "decoder.mid.1", channels);
    mid_res_2_ = ResnetBlock::load(w, "decoder.mid.2", channels, channels);
    for (int64_t i = 0; i < levels; ++i) {
      const std::string prefix = "decoder.conv_blocks." + std::to_string(i);
      const int64_t out = c.ch * c.ch_mult[static_cast<size_t>(levels - 1 - i)];
      Block block;
      for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
        block.res.push_back(ResnetBlock::load(w, prefix + ".res." + std::to_string(j), channels, out));
        channels = out;
        if (i == 0) block.attn.push_back(AttnBlock::load(w, prefix + ".attn." + std::to_string(j), out));
      }
      if (i != levels - 1) block.upsample = Upsample::load(w, prefix + ".upsample", out);
      blocks_.push_back(std::move(block));
    }
    norm_out_ = GroupNorm::load(w, "decoder.norm_out", channels);
    conv_out_ = Conv2d::load(w, "decoder.conv_out", channels, c.out_channels, 3);
  }

  at::Tensor decode_float(const at::Tensor& codes) const override {
    c10::InferenceMode inference;
    at::Tensor h = conv_in_(post_quant_conv_(lookup(codes)));
    h = mid_res_2_(mid_attn_(mid_res_0_(h)));
    for (const Block& block : blocks_) {
      for (size_t j = 0; j < block.res.size(); ++j) {
        h = block.res[j](h);
        if (!block.attn.empty()) h = block.attn[j](h);
      }
      if (block.upsample) h = (*block.upsample)(h);
    }
    return conv_out_(swish(norm_out_(h)))[0];
  }

  // The latent vectors the decoder actually sees (normalised when the bundle says so).
  at::Tensor codebook() const override { return codebook_; }

 private:
  struct Block {
    std::vector<ResnetBlock> res;
    std::vector<AttnBlock> attn;  // conv_blocks.0 only: one per res block
    std::optional<Upsample> upsample;
  };

  at::Tensor lookup(const at::Tensor& codes) const {  // -> [1, embed_dim, H, W]
    return codebook_rows(codebook_, codes, "vq16").unsqueeze(0).permute({0, 3, 1, 2}).contiguous();
  }

  VQConfig config_;
  at::Tensor codebook_;
  Conv2d post_quant_conv_, conv_in_;
  ResnetBlock mid_res_0_, mid_res_2_;
  AttnBlock mid_attn_;
  std::vector<Block> blocks_;
  GroupNorm norm_out_;
  Conv2d conv_out_;
};

}  // namespace

std::unique_ptr<VQDecoder> make_vq16_decoder(const VQConfig& config, const io::WeightMap& weights) {
  return std::make_unique<Vq16Decoder>(config, weights);
}

}  // namespace sjd::vq
