// make_vq_decoder: picks the decoder implementation a bundle's `vq.kind` names.
#include "vq/vq_decoder.h"

#include <c10/core/InferenceMode.h>

#include <stdexcept>

#include "vq/chameleon_vqgan.h"
#include "vq/movq_decoder.h"
#include "vq/vq16_decoder.h"

namespace sjd::vq {

std::unique_ptr<VQDecoder> make_vq_decoder(const VQConfig& config, const io::WeightMap& weights) {
  if (config.kind == "chameleon-vqgan") return std::make_unique<ChameleonVQGAN>(config, weights);
  if (config.kind == "movq") return make_movq_decoder(config, weights);
  if (config.kind == "vq16") return make_vq16_decoder(config, weights);
  throw std::invalid_argument("vq.kind: unknown VQ decoder \"" + config.kind +
                              "\" (known: chameleon-vqgan, movq, vq16)");
}

at::Tensor VQDecoder::decode(const at::Tensor& codes) const { return to_rgb_bytes(decode_float(codes)); }

at::Tensor to_rgb_bytes(const at::Tensor& image) {
  c10::InferenceMode inference;
  // Values are in [0, 255] after the clamp, so the cast truncates like numpy's astype(uint8).
  const at::Tensor scaled = (image.clamp(-1.0, 1.0) + 1.0) / 2.0 * 255.0;
  return scaled.permute({1, 2, 0}).to(at::kByte).contiguous();
}

}  // namespace sjd::vq
