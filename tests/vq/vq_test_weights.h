#pragma once
// Random checkpoints in the Chameleon VQGAN key layout for the vq tests,
// written from the layout in docs/bundles.md (not from the decoder's code).
#include <ATen/ATen.h>

#include <map>
#include <string>

#include "io/weights.h"
#include "vq/vq_decoder.h"

namespace sjd::vq::testing {

// ch 32, ch_mult [2, 3], one attention resolution (the lowest level), so
// every block kind is present: 2 levels, 2x upsampling. Widths 64 and 96 put
// several channels in each of GroupNorm's 32 groups; with one channel per
// group a per-channel bias feeding a norm cancels out, hiding mistakes.
VQConfig tiny_config();

// name -> tensor for every tensor the decoder of `config` reads, random
// normal values scaled by 1/sqrt(fan_in), seeded.
std::map<std::string, at::Tensor> random_vqgan_tensors(const VQConfig& config, uint64_t seed);

io::WeightMap to_weight_map(const std::map<std::string, at::Tensor>& tensors, const std::string& source);

}  // namespace sjd::vq::testing
