#pragma once
// VQ image decoders: a grid of codebook indices -> an RGB image. The bundle's
// `vq` object says which decoder and its architecture numbers; the weights
// come from a WeightMap holding the checkpoint's own tensor names.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/weights.h"

namespace sjd::vq {

struct VQConfig {
  std::string kind;  // "chameleon-vqgan"
  int64_t codebook_size = 0;
  int64_t embed_dim = 0;   // codebook vector length
  int64_t z_channels = 0;  // post_quant_conv output, decoder input
  int64_t ch = 0;          // base channel count; level i has ch * ch_mult[i]
  std::vector<int64_t> ch_mult;
  int64_t num_res_blocks = 0;  // the decoder uses num_res_blocks + 1 per level
  // Taming's attention placement: level i has attention blocks when
  // resolution / 2^i is listed here (resolution is the training image side).
  std::vector<int64_t> attn_resolutions;
  int64_t out_channels = 0;
  int64_t downsample = 0;  // pixels per code along each side: 2^(levels-1)
  // Training image side (taming's `resolution`); only needed, and then
  // required, when attn_resolutions is not empty. 0 when absent.
  int64_t resolution = 0;
  nlohmann::json raw;  // the whole `vq` object: kind-specific keys (MoVQ's temporal stack, ...)
  std::string where;   // names that object in messages ("models/default/bundle.json: vq"); empty in tests
};

// The decoder kinds make_vq_decoder builds, as "chameleon-vqgan, movq, vq16" for messages.
std::string known_vq_decoder_kinds();

// Reads a bundle's `vq` object. `where` names that object in messages, e.g.
// "models/default/bundle.json: vq"; every error names the offending key.
// Unknown keys are errors; `weights` is accepted and left to the bundle loader.
VQConfig parse_vq_config(const nlohmann::json& j, const std::string& where);

class VQDecoder {
 public:
  virtual ~VQDecoder() = default;
  // codes: integer [H, W] codebook indices -> the decoder's raw output
  // [3, H*ds, W*ds] in about [-1, 1] (parity tests compare this).
  virtual at::Tensor decode_float(const at::Tensor& codes) const = 0;
  // codes -> uint8 RGB [H*ds, W*ds, 3] (CPU, wherever the decoder runs).
  at::Tensor decode(const at::Tensor& codes) const;
  // Codebook latent vectors [codebook_size, embed_dim], float32, on the decoder's
  // device (LANTERN neighbourhoods use their distances).
  virtual at::Tensor codebook() const = 0;
};

// The codebook rows of integer codes [H, W] -> [H, W, D] on the codebook's device. The codes
// are checked first (a non-empty grid of integers inside the codebook); errors name the
// decoder `kind` and the first code outside it.
at::Tensor codebook_rows(const at::Tensor& codebook, const at::Tensor& codes, const std::string& kind);

// The decoder's [-1, 1] output [3, H, W] -> uint8 [H, W, 3], truncating like
// the references' `(clamp(x) + 1) / 2 * 255 -> uint8` conversion.
at::Tensor to_rgb_bytes(const at::Tensor& image);

// Builds the decoder `config.kind` names, validating every tensor's shape
// against the config (errors name the tensor, both shapes and the file, and then
// the bundle's `vq` object the expected shapes come from), with its
// weights on `device` (float32: a GPU decodes in a few milliseconds what takes a
// CPU seconds at 768 px).
std::unique_ptr<VQDecoder> make_vq_decoder(const VQConfig& config, const io::WeightMap& weights,
                                           at::Device device = at::kCPU);

}  // namespace sjd::vq
