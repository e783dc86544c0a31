#pragma once
// The safetensors format (HF's weight files): an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__":
// {str: str}}, then the raw little-endian tensor bytes, offsets relative to the
// end of the header.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>

namespace sjd::io {

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" object
};

// Reads and validates every header entry; throws WeightError naming the file
// and tensor. The file is memory-mapped: tensors are CPU tensors in the stored
// dtype that share (and keep alive) a private, copy-on-write mapping, except
// tensors whose offset is not a multiple of their item size, which are copied.
SafetensorsFile read_safetensors(const std::filesystem::path& file);

// Writes `tensors` (any device or layout; stored contiguous, in their dtype)
// atomically. Throws WeightError for a dtype safetensors cannot store and
// FileError when the file cannot be written.
void write_safetensors(const std::filesystem::path& file,
                       const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sjd::io
