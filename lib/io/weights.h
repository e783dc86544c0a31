#pragma once
// A model's tensors by name, read from safetensors files (single or sharded via
// an index JSON) or from TorchScript archives written by scripts/export_bundle.py.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace sjd::io {

// Thrown for any malformed or inconsistent weight file; the message names the
// file and, where there is one, the tensor.
class WeightError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WeightMap {
 public:
  // Loads one file by its extension: .safetensors, .index.json (sharded
  // safetensors), or .pt/.ts (TorchScript archive). Tensors are CPU tensors in
  // the dtype stored in the file.
  static WeightMap load(const std::filesystem::path& file);
  // Loads and merges several files; a name present in two files is an error.
  static WeightMap load_all(const std::vector<std::filesystem::path>& files);

  bool contains(const std::string& name) const;
  // The tensor `name`; error naming the tensor and the source files if absent.
  const at::Tensor& get(const std::string& name) const;
  // The tensor `name`, checked to have `shape`; the error names tensor,
  // expected and found shapes, and the file it came from.
  const at::Tensor& get(const std::string& name, at::IntArrayRef shape) const;
  // Where `name` was read from (for error messages).
  std::string source_of(const std::string& name) const;

  void insert(const std::string& name, at::Tensor tensor, const std::string& source);
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }

 private:
  std::map<std::string, at::Tensor> tensors_;
  std::map<std::string, std::string> sources_;
};

}  // namespace sjd::io
