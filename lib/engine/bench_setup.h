#pragma once
// What `sjd bench` measures: the architecture presets, their deterministic
// random weights, and a stand-in VQ decoder of the same channel plan.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "engine/device.h"
#include "model/transformer_config.h"
#include "model/transformer_weights.h"
#include "sampling/logits_pipeline.h"

namespace sjd::engine {

// A taming-style conv decoder's shape: channels from the top (coarsest) level
// down, residual blocks per level, attention blocks at the top level.
struct VqPlan {
  int64_t z_channels = 0;
  std::vector<int64_t> channels;  // top level first; an upsample between consecutive levels
  int64_t res_blocks = 0;
  bool top_attention = false;
};

struct BenchPreset {
  std::string name;
  std::string description;
  model::TransformerConfig transformer;
  int64_t prompt_tokens = 0;     // conditional prompt length
  int64_t generated_tokens = 0;  // codes + structure tokens per image
  int64_t grid = 0;              // image codes per side
  int64_t first_code_id = 0;
  int64_t codebook_size = 0;
  int64_t image_side = 0;        // pixels
  double cfg = 1.0;
  sampling::CfgMix cfg_mix = sampling::CfgMix::kLogits;
  int64_t top_k = 0;
  VqPlan vq;
};

// lumina-7b-768, emu3-8b-720, llamagen-xl-512, tiny (the CI check).
const std::vector<std::string>& bench_preset_names();
BenchPreset bench_preset(const std::string& name);  // throws InputError naming an unknown preset

// The bench's weights: w[i] = a (2 h(i) / 2^32 - 1) with h a 32-bit integer
// hash of the element index salted by the tensor's Hugging Face name and the
// seed, a = 0.02 sqrt(3) (std 0.02); norms are ones, qk-norm biases zeros.
// Built on the device with integer tensor ops that
// scripts/bench_eager_reference.py repeats, so both load the same numbers.
at::Tensor hashed_weight(const std::string& name, at::IntArrayRef shape, uint64_t seed, const Placement& placement);
model::TransformerWeights bench_weights(const model::TransformerConfig& config, uint64_t seed,
                                        const Placement& placement);

// The stand-in decoder (float32, random weights) and one decode of a grid of codes.
class VqStandIn {
 public:
  VqStandIn(const VqPlan& plan, at::Device device, uint64_t seed);
  at::Tensor decode(int64_t grid) const;  // [1, 3, H, W]

 private:
  struct Conv {
    at::Tensor weight, bias;
  };
  Conv conv(int64_t in, int64_t out, int64_t kernel);
  at::Tensor res_block(const at::Tensor& x, size_t& next) const;
  at::Tensor attention(const at::Tensor& x, size_t& next) const;

  VqPlan plan_;
  at::Device device_;
  at::Generator generator_;
  std::vector<Conv> convs_;  // in the order decode() uses them
};

}  // namespace sjd::engine
