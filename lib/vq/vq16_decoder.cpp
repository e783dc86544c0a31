#include "vq/vq16_decoder.h"

#include <stdexcept>

namespace sjd::vq {

// Placeholder until the family's decoder lands (issue 4).
std::unique_ptr<VQDecoder> make_vq16_decoder(const VQConfig& config, const io::WeightMap&) {
  throw std::invalid_argument("vq.kind \"" + config.kind + "\" is not implemented yet");
}

}  // namespace sjd::vq
