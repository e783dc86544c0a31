#pragma once
// LlamaGen's VQ-16 decoder (L2-normalised codebook).
#include <memory>

#include "vq/vq_decoder.h"

namespace sjd::vq {

std::unique_ptr<VQDecoder> make_vq16_decoder(const VQConfig& config, const io::WeightMap& weights);

}  // namespace sjd::vq
