#pragma once
// TorchScript archives (.pt/.ts files written by torch.jit.save, as
// scripts/export_bundle.py does) read as a map of tensors by name.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>

namespace sjd::io {

// Every tensor of the archive's module tree: parameters, buffers and plain
// tensor attributes, named by their path ("decoder.conv_in.weight"). Tensors
// are detached, contiguous CPU tensors in their stored dtype. Throws
// WeightError naming the file if it cannot be loaded.
std::map<std::string, at::Tensor> read_torchscript_tensors(const std::filesystem::path& file);

}  // namespace sjd::io
