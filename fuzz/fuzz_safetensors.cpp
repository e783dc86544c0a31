// safetensors files: the header JSON, offsets and dtypes must give a WeightError
// or tensors that can be read end to end -- never an out-of-bounds read.
#include "fuzz_input.h"
#include "io/safetensors.h"
#include "io/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = sjd::fuzz::write_input(data, size, "input.safetensors");
  try {
    for (const auto& [name, tensor] : sjd::io::read_safetensors(file).tensors) {
      if (tensor.numel() > 0) tensor.to(at::kDouble).sum();  // touches every byte the header claims
    }
  } catch (const sjd::io::WeightError&) {
  }
  return 0;
}
