// make_vq_decoder: picks the decoder implementation a bundle's `vq.kind` names.
#include "vq/vq_decoder.h"

#include <stdexcept>

#include "vq/chameleon_vqgan.h"

namespace sjd::vq {

std::unique_ptr<VQDecoder> make_vq_decoder(const VQConfig& config, const io::WeightMap& weights) {
  if (config.kind == "chameleon-vqgan") return std::make_unique<ChameleonVQGAN>(config, weights);
  throw std::invalid_argument("vq.kind: unknown VQ decoder \"" + config.kind + "\" (known: chameleon-vqgan)");
}

}  // namespace sjd::vq
