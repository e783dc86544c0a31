#pragma once
// Emu3's MoVQ decoder (BAAI/Emu3-VisionTokenizer, the release's key names):
// codes -> codebook vectors `quant` [1, E, T=1, H, W]; post_quant_conv (causal
// 3D, kernel 3x1x1) gives z; z and quant go together (stacked on the batch)
// through the temporal stack (`decoder.time_res_stack.{i}`, then
// `decoder.time_conv.{i}` upsamples each followed by swish), T 1 -> 4; then
// frame 0 of z and of quant feeds a taming-style 2D decoder whose every norm is
// a SpatialNorm conditioned on quant (`decoder.conv_in`, `decoder.mid.*`,
// `decoder.up.{level}.*`, `decoder.norm_out`, `decoder.conv_out`). Only frame 0
// is decoded: the time convolutions are causal, so it depends on nothing later.
#include <memory>
#include <vector>

#include "vq/movq_blocks.h"
#include "vq/vq_decoder.h"

namespace sjd::vq {

// The `vq` keys MoVQ adds to the shared ones (kept in VQConfig::raw).
struct MovqConfig {
  std::vector<int64_t> attn_levels;          // levels of the up path with attention blocks (release: [3])
  int64_t temporal_downsample_factor = 0;    // frames per latent frame; log2 of it temporal upsamples
};

// Reads and checks MoVQ's own keys of `config.raw`; unknown keys, or taming's
// attn_resolutions / resolution (MoVQ places attention by level), are errors
// naming the key.
MovqConfig parse_movq_config(const VQConfig& config);

class MovqDecoder : public VQDecoder {
 public:
  MovqDecoder(const VQConfig& config, const io::WeightMap& weights);

  at::Tensor decode_float(const at::Tensor& codes) const override;
  at::Tensor codebook() const override { return codebook_; }

 private:
  struct Level {  // `decoder.up.{level}`; level 0 is the full-resolution one
    std::vector<SpatialResnetBlock> blocks;
    std::vector<SpatialAttnBlock> attns;  // empty, or one per block
    std::optional<Upsample> upsample;
  };

  at::Tensor lookup(const at::Tensor& codes) const;  // [1, embed_dim, 1, H, W]

  VQConfig config_;
  at::Tensor codebook_;
  CausalConv3d post_quant_conv_;
  std::vector<TemporalResnetBlock> time_res_stack_;
  std::vector<TemporalUpsample> time_conv_;
  Conv2d conv_in_;
  SpatialResnetBlock mid_block_1_, mid_block_2_;
  SpatialAttnBlock mid_attn_1_;
  std::vector<Level> levels_;
  SpatialNorm norm_out_;
  Conv2d conv_out_;
};

std::unique_ptr<VQDecoder> make_movq_decoder(const VQConfig& config, const io::WeightMap& weights);

}  // namespace sjd::vq
