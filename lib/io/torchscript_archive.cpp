// The only translation unit that includes <torch/script.h> (a heavy header).
#include "io/torchscript_archive.h"

#include "io/weights.h"

#include <torch/script.h>

namespace sjd::io {
namespace {

// Parameters and buffers are attributes of a scripted module's class, so
// walking attributes finds them together with plain tensor attributes.
void collect_tensors(const torch::jit::Module& module, const std::string& prefix,
                     std::map<std::string, at::Tensor>& tensors) {
  for (const auto& attribute : module.named_attributes(/*recurse=*/false)) {
    const std::string name = prefix + attribute.name;
    if (attribute.value.isTensor()) {
      tensors.emplace(name, attribute.value.toTensor().detach().contiguous());
    } else if (attribute.value.isModule()) {
      collect_tensors(attribute.value.toModule(), name + ".", tensors);
    }
  }
}

}  // namespace

std::map<std::string, at::Tensor> read_torchscript_tensors(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) {
    throw WeightError(file.string() + ": cannot load TorchScript archive: no such file");
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(file.string(), at::kCPU);
  } catch (const c10::Error& error) {
    throw WeightError(file.string() + ": cannot load TorchScript archive: " + error.what_without_backtrace());
  } catch (const std::exception& error) {
    throw WeightError(file.string() + ": cannot load TorchScript archive: " + error.what());
  }
  std::map<std::string, at::Tensor> tensors;
  collect_tensors(module, "", tensors);
  return tensors;
}

}  // namespace sjd::io
