#include "io/sharded_index.h"

#include "io/input_files.h"
#include "io/safetensors.h"
#include "text/json_error.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <vector>

namespace sjd::io {
namespace {

[[noreturn]] void fail(const std::filesystem::path& index_file, const std::string& what) {
  throw WeightError(index_file.string() + ": " + what);
}

// The index's "weight_map": tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index_file) {
  require_regular_file(index_file, "index file");
  std::ifstream in(index_file, std::ios::binary);
  if (!in) fail(index_file, "cannot open the index file");
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    fail(index_file, "not valid JSON: " + text::json_error_message(error));
  }
  if (!index.is_object() || !index.contains("weight_map")) fail(index_file, "no \"weight_map\" object");
  const nlohmann::json& entries = index["weight_map"];
  if (!entries.is_object()) fail(index_file, "\"weight_map\" is not an object");
  if (entries.empty()) fail(index_file, "\"weight_map\" names no tensor");
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : entries.items()) {
    if (!shard.is_string() || shard.get<std::string>().empty()) {
      const std::string found = shard.is_string() ? "an empty string" : std::string("a ") + shard.type_name();
      fail(index_file, "tensor '" + tensor + "': the shard is " + found + ", not a file name");
    }
    weight_map[tensor] = shard.get<std::string>();
  }
  return weight_map;
}

// A shard the index names: its name there, the first tensor listed in it (for messages) and its file.
struct Shard {
  std::string name;
  std::string first_tensor;
  std::filesystem::path file;
};

[[noreturn]] void fail_shard(const std::filesystem::path& index_file, const Shard& shard, const std::string& what) {
  fail(index_file, "shard '" + shard.name + "' (listed for tensor '" + shard.first_tensor + "'): " + what);
}

// Each shard of `weight_map` once, in name order, confined to the index's folder.
std::vector<Shard> shards_of(const std::filesystem::path& index_file,
                             const std::map<std::string, std::string>& weight_map) {
  std::map<std::string, std::string> first_tensor_of_shard;
  for (const auto& [tensor, shard] : weight_map) first_tensor_of_shard.emplace(shard, tensor);
  std::vector<Shard> shards;
  for (const auto& [name, first_tensor] : first_tensor_of_shard) {
    Shard shard{name, first_tensor, {}};
    try {
      shard.file = confined_path(index_file.parent_path(), name, "shard of tensor '" + first_tensor + "'");
    } catch (const std::runtime_error& error) {  // FileError for a name outside the folder
      fail_shard(index_file, shard, error.what());
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

}  // namespace

WeightMap load_sharded_safetensors(const std::filesystem::path& index_file) {
  const std::map<std::string, std::string> weight_map = read_weight_map(index_file);
  WeightMap weights;
  for (const Shard& shard_entry : shards_of(index_file, weight_map)) {
    const std::string& shard = shard_entry.name;
    const std::filesystem::path& shard_file = shard_entry.file;
    SafetensorsFile contents;
    try {
      contents = read_safetensors(shard_file);
    } catch (const std::runtime_error& error) {  // WeightError
      fail_shard(index_file, shard_entry, error.what());
    }
    for (auto& [tensor, value] : contents.tensors) {
      // Tensors the index does not list are kept (HF loaders keep them too);
      // a listed tensor must be in its listed shard only.
      auto listed = weight_map.find(tensor);
      if (listed != weight_map.end() && listed->second != shard) {
        fail(index_file, "tensor '" + tensor + "': the index places it in '" + listed->second +
                             "' but it is in '" + shard + "'");
      }
      weights.insert(tensor, std::move(value), shard_file.string());
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (!weights.contains(tensor)) {
      fail(index_file, "tensor '" + tensor + "': the index places it in '" + shard + "', which does not contain it");
    }
  }
  return weights;
}

std::vector<std::filesystem::path> sharded_files(const std::filesystem::path& index_file) {
  std::vector<std::filesystem::path> files;
  for (const Shard& shard : shards_of(index_file, read_weight_map(index_file))) files.push_back(shard.file);
  return files;
}

}  // namespace sjd::io
