// Writes safetensors files in the layout HF's library writes: tensors in name
// order, back to back, the header padded with spaces to a multiple of 8 bytes
// so that every tensor starts 8-byte aligned relative to the file.
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/safetensors_dtype.h"
#include "io/weights.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace sjd::io {

void write_safetensors(const std::filesystem::path& file, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contents;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string where = file.string() + ": tensor '" + name + "': ";
    if (name == "__metadata__") throw WeightError(where + "the name is reserved for the metadata");
    if (!tensor.defined() || tensor.layout() != at::kStrided) throw WeightError(where + "not a dense tensor");
    auto dtype = safetensors_dtype_of(tensor.scalar_type());
    if (!dtype) throw WeightError(where + "dtype " + std::string(c10::toString(tensor.scalar_type())) +
                                  " has no safetensors name here");
    at::Tensor content = tensor.detach().cpu().contiguous();
    const uint64_t nbytes = content.nbytes();
    header[name] = {{"dtype", *dtype}, {"shape", content.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contents.push_back(std::move(content));
  }

  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header_text.size() >> (8 * i)) & 0xff);

  AtomicFileWriter writer(file);
  writer.write(length, sizeof(length));
  writer.write(header_text);
  for (const at::Tensor& content : contents) writer.write(content.data_ptr(), content.nbytes());
  writer.commit();
}

}  // namespace sjd::io
