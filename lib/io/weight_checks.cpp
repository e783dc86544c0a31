#include "io/weight_checks.h"

namespace sjd::io {
namespace {

// `visit` on consecutive slices of the flattened tensor, so that scanning a multi-gigabyte
// embedding allocates no full-size temporary (a boolean or absolute-value copy of it).
template <typename Visit>
void for_each_slice(const at::Tensor& tensor, Visit visit) {
  const at::Tensor flat = tensor.reshape({-1});
  constexpr int64_t kSlice = int64_t{1} << 24;
  for (int64_t begin = 0; begin < flat.numel(); begin += kSlice) {
    visit(flat.narrow(0, begin, std::min(kSlice, flat.numel() - begin)));
  }
}

bool all_finite(const at::Tensor& tensor) {
  bool finite = true;
  for_each_slice(tensor, [&](const at::Tensor& slice) { finite = finite && at::isfinite(slice).all().item<bool>(); });
  return finite;
}

double largest_magnitude(const at::Tensor& tensor) {
  double largest = 0.0;
  for_each_slice(tensor, [&](const at::Tensor& slice) {
    largest = std::max(largest, slice.abs().max().item<double>());
  });
  return largest;
}

}  // namespace

void check_weights_usable(const WeightMap& weights, bool floating_only) {
  for (const std::string& name : weights.names()) {
    const at::Tensor& tensor = weights.get(name);
    if (!at::isFloatingType(tensor.scalar_type())) {
      if (!floating_only) continue;
      throw WeightError(weights.source_of(name) + ": tensor '" + name + "' has dtype " +
                        std::string(c10::toString(tensor.scalar_type())) + "; model weights must be floating point");
    }
    if (!all_finite(tensor)) {
      throw WeightError(weights.source_of(name) + ": tensor '" + name + "' holds NaN or infinite values");
    }
  }
}

LargestWeight largest_weight(const WeightMap& weights) {
  LargestWeight largest;
  for (const std::string& name : weights.names()) {
    const at::Tensor& tensor = weights.get(name);
    if (!at::isFloatingType(tensor.scalar_type()) || tensor.numel() == 0) continue;
    const double magnitude = largest_magnitude(tensor);
    if (magnitude > largest.magnitude) largest = {name, weights.source_of(name), magnitude};
  }
  return largest;
}

void refuse_code_archives(const std::vector<std::filesystem::path>& files) {
  for (const auto& file : files) {
    const std::string extension = file.extension().string();
    if (extension == ".pt" || extension == ".ts") {
      throw WeightError(file.string() + ": TorchScript weights run code when loaded; pass --trust-code only if you "
                        "trust who made this bundle (safetensors bundles never run code)");
    }
  }
}

}  // namespace sjd::io
