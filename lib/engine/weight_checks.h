#pragma once
// A check on a transformer's weights against its config: layers the config does
// not use mean the weights belong to another model (the checks every part's
// weights get are io/weight_checks.h). Errors are InputError naming the tensor
// and its file.
#include <cstdint>
#include <string>

#include "io/weights.h"

namespace sjd::engine {

// No tensor is named for a transformer layer at or past `num_layers`
// ("model.layers.7.mlp.up_proj.weight" with 4 layers); `where` names the config key.
void check_no_extra_layers(const io::WeightMap& weights, int64_t num_layers, const std::string& where);

}  // namespace sjd::engine
