#pragma once
// Checks on weights before anything uses them, for every part of a bundle that
// has weights (transformer, VQ decoder, LlamaGen's T5 encoder). A tensor can be
// well-formed and still unusable: NaN or infinity in any weight makes every logit
// NaN (the sampler then has nothing to draw), and an integer dtype relabelled in
// place of a float one decodes garbage. A TorchScript archive runs the code it
// holds when loaded (torch.jit.load executes __setstate__ methods), so it is
// opened only when the user trusts the bundle. Errors are WeightError naming the
// tensor or file.
#include <filesystem>
#include <string>
#include <vector>

#include "io/weights.h"

namespace sjd::io {

// Every floating-point tensor is finite; with `floating_only`, every tensor must
// be floating point (a transformer or text encoder has no integer weights).
void check_weights_usable(const WeightMap& weights, bool floating_only);

// The tensor whose largest magnitude is the largest of all, for naming a culprit when the model's
// output overflows though every weight is finite.
struct LargestWeight {
  std::string name;
  std::string source;      // its file
  double magnitude = 0.0;  // max |w|
};
LargestWeight largest_weight(const WeightMap& weights);

// Throws for the first TorchScript archive (.pt, .ts) among `files`: called for
// every weight file of a bundle unless the user passed --trust-code.
void refuse_code_archives(const std::vector<std::filesystem::path>& files);

}  // namespace sjd::io
