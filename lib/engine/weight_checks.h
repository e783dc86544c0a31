#pragma once
// Checks on a bundle's weights beyond what the safetensors reader can see: a
// tensor can be well-formed and still unusable. NaN or infinity in any weight
// makes every logit NaN (the sampler then has nothing to draw), an integer dtype
// relabelled in place of a float one decodes garbage, and layers the config does
// not use mean the weights belong to another model. Errors are InputError naming
// the tensor and its file.
#include <cstdint>
#include <string>

#include "io/weights.h"

namespace sjd::engine {

// Every floating-point tensor is finite; with `floating_only`, every tensor must
// be floating point (a transformer has no integer weights).
void check_weights_usable(const io::WeightMap& weights, bool floating_only);

// No tensor is named for a transformer layer at or past `num_layers`
// ("model.layers.7.mlp.up_proj.weight" with 4 layers); `where` names the config key.
void check_no_extra_layers(const io::WeightMap& weights, int64_t num_layers, const std::string& where);

}  // namespace sjd::engine
