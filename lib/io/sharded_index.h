#pragma once
// Sharded safetensors checkpoints as HF writes them: an index JSON
// (`model.safetensors.index.json`) whose "weight_map" names, for every tensor,
// the shard file (relative to the index) that holds it.
#include "io/weights.h"

#include <filesystem>
#include <vector>

namespace sjd::io {

// Loads every shard the index names and checks that each listed tensor is in
// the shard the index says; errors name the index file and the tensor. Each
// tensor's source is its shard file.
WeightMap load_sharded_safetensors(const std::filesystem::path& index_file);

// The shard files the index names, each once, in name order (WeightError naming the index otherwise).
std::vector<std::filesystem::path> sharded_files(const std::filesystem::path& index_file);

}  // namespace sjd::io
