#pragma once
// Emu3's MoVQ decoder (SpatialNorm, shared temporal stack; frame 0).
#include <memory>

#include "vq/vq_decoder.h"

namespace sjd::vq {

std::unique_ptr<VQDecoder> make_movq_decoder(const VQConfig& config, const io::WeightMap& weights);

}  // namespace sjd::vq
