#include "io/weights.h"

#include "io/safetensors.h"
#include "io/sharded_index.h"
#include "io/torchscript_archive.h"

#include <set>
#include <sstream>

namespace sjd::io {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string format_shape(at::IntArrayRef shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

}  // namespace

WeightMap WeightMap::load(const std::filesystem::path& file) {
  const std::string file_name = file.filename().string();
  if (ends_with(file_name, ".index.json")) return load_sharded_safetensors(file);

  std::map<std::string, at::Tensor> tensors;
  if (ends_with(file_name, ".safetensors")) {
    tensors = read_safetensors(file).tensors;
  } else if (ends_with(file_name, ".pt") || ends_with(file_name, ".ts")) {
    tensors = read_torchscript_tensors(file);
  } else {
    throw WeightError(file.string() + ": unknown weight file type (expected .safetensors, .index.json, .pt or .ts)");
  }
  WeightMap weights;
  for (auto& [name, tensor] : tensors) weights.insert(name, std::move(tensor), file.string());
  return weights;
}

WeightMap WeightMap::load_all(const std::vector<std::filesystem::path>& files) {
  WeightMap merged;
  for (const auto& file : files) {
    WeightMap part = load(file);
    for (auto& [name, tensor] : part.tensors_) merged.insert(name, std::move(tensor), part.sources_.at(name));
  }
  return merged;
}

bool WeightMap::contains(const std::string& name) const { return tensors_.count(name) != 0; }

const at::Tensor& WeightMap::get(const std::string& name) const {
  auto found = tensors_.find(name);
  if (found != tensors_.end()) return found->second;
  std::set<std::string> files;
  for (const auto& [tensor, source] : sources_) files.insert(source);
  std::string listed;
  for (const auto& file : files) listed += (listed.empty() ? "" : ", ") + file;
  throw WeightError("tensor '" + name + "' not found in " + (listed.empty() ? "(no weight files loaded)" : listed));
}

const at::Tensor& WeightMap::get(const std::string& name, at::IntArrayRef shape) const {
  const at::Tensor& tensor = get(name);
  if (tensor.sizes() != shape) {
    throw WeightError("tensor '" + name + "' in " + source_of(name) + ": expected shape " + format_shape(shape) +
                      ", found " + format_shape(tensor.sizes()));
  }
  return tensor;
}

std::string WeightMap::source_of(const std::string& name) const {
  auto found = sources_.find(name);
  return found == sources_.end() ? std::string("(not loaded)") : found->second;
}

void WeightMap::insert(const std::string& name, at::Tensor tensor, const std::string& source) {
  auto existing = sources_.find(name);
  if (existing != sources_.end()) {
    throw WeightError("tensor '" + name + "' is in both " + existing->second + " and " + source);
  }
  tensors_.emplace(name, std::move(tensor));
  sources_.emplace(name, source);
}

std::vector<std::string> WeightMap::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) names.push_back(name);
  return names;
}

}  // namespace sjd::io
