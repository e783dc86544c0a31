#pragma once
// Chameleon's VQGAN decoder (Meta's vqgan.ckpt, used by Lumina-mGPT): a plain
// codebook lookup, post_quant_conv, and taming-transformers' conv Decoder.
#include <ATen/ATen.h>

#include <vector>

#include "vq/taming_blocks.h"
#include "vq/vq_decoder.h"

namespace sjd::vq {

class ChameleonVQGAN : public VQDecoder {
 public:
  // Loads and shape-checks every tensor the decode path uses (see
  // docs/bundles.md); tensors of the encoder side, if present, are ignored.
  ChameleonVQGAN(const VQConfig& config, const io::WeightMap& weights);

  at::Tensor decode_float(const at::Tensor& codes) const override;
  at::Tensor codebook() const override { return codebook_; }

 private:
  // One resolution of the up path; levels are indexed as in the checkpoint
  // (`decoder.up.{level}`), level 0 being the full-resolution one.
  struct Level {
    std::vector<ResnetBlock> blocks;
    std::vector<AttnBlock> attns;  // empty, or one per block
    std::optional<Upsample> upsample;
  };

  at::Tensor lookup(const at::Tensor& codes) const;  // [1, embed_dim, H, W]

  VQConfig config_;
  at::Tensor codebook_;  // [codebook_size, embed_dim]
  Conv2d post_quant_conv_, conv_in_;
  ResnetBlock mid_block_1_, mid_block_2_;
  AttnBlock mid_attn_1_;
  std::vector<Level> levels_;
  GroupNorm norm_out_;
  Conv2d conv_out_;
};


}  // namespace sjd::vq
