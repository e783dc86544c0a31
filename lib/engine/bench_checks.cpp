// What `sjd bench` is asked to time, checked before it makes its weights (minutes and
// tens of GB for the 7-8B presets): windows that fit its mid-image fixture, and the
// memory of its largest moment against what the device has.
#include <algorithm>
#include <string>

#include "decoding/window_planner.h"
#include "engine/bench.h"
#include "engine/bundle.h"
#include "engine/memory_estimate.h"

namespace sjd::engine {
namespace {

int64_t parameters(const model::TransformerConfig& c) {
  const int64_t attention = c.hidden_size * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads);  // q, k, v, o
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;
  return c.num_layers * (attention + mlp + 2 * c.hidden_size) + 2 * c.vocab_size * c.hidden_size + c.hidden_size;
}

}  // namespace

BenchMemory bench_memory(const BenchOptions& options, const BenchPreset& preset) {
  const int64_t length = preset.grid * preset.grid;
  const int64_t left = length - length / 2;
  const model::TransformerConfig& c = preset.transformer;
  const at::Device device = options.placement.device;
  const int64_t element = static_cast<int64_t>(c10::elementSize(options.placement.dtype));
  const int64_t weights = parameters(c) * element;
  // Making a weight hashes its element indices in int64 and float64: the largest tensor's worth of each.
  const int64_t making = std::max(c.vocab_size, c.intermediate_size * 2) * c.hidden_size * 16;
  const int64_t tree = decoding::window_nodes({BenchReport::kTreeChain, BenchReport::kTreeK, BenchReport::kTreeDepth});
  int64_t widest = std::max<int64_t>(tree, BatchTiming::kBatchWindow);
  for (const int w : options.windows) widest = std::max<int64_t>(widest, w);
  int64_t largest_step = 0;
  std::string largest_what;
  // The step fixtures run one prompt's CFG pair at the widest window, the batch axis B prompts' at its own.
  std::vector<std::pair<int, int64_t>> steps = {{1, widest}};
  for (const int b : options.batch_sizes) steps.emplace_back(b, BatchTiming::kBatchWindow);
  for (const auto& [b, window] : steps) {
    GenerationShape shape;
    shape.rows = 2 * static_cast<int64_t>(b);
    shape.sequences = b;
    shape.longest_prompt = preset.prompt_tokens + length / 2;
    shape.image_tokens = left;
    shape.window_nodes = window;
    shape.head_rows = preset.codebook_size;
    shape.step_graphs = device.is_cuda();
    const MemoryEstimate e = estimate_generation_memory(c, shape, options.placement.dtype);
    if (e.total() > largest_step) {
      largest_step = e.total();
      largest_what = "at batch size " + std::to_string(b) + ": " + e.describe();
    }
  }
  return {weights + std::max(making, largest_step), "weights " + format_bytes(weights) + ", then " + largest_what};
}

void check_bench_options(const BenchOptions& options, const BenchPreset& preset) {
  // The fixture commits half the image's codes and times windows on what is left.
  const int64_t length = preset.grid * preset.grid;
  const int64_t left = length - length / 2;
  for (const int w : options.windows) {
    if (w < 1 || w >= left) {
      throw InputError("--windows " + std::to_string(w) + ": the " + preset.name +
                       " preset times windows at mid-image, " + "where " + std::to_string(left) +
                       " codes are left: at most " + std::to_string(left - 1));
    }
  }
  const BenchMemory memory = bench_memory(options, preset);
  const at::Device device = options.placement.device;
  const int64_t available = device.is_cpu() ? available_host_memory() : available_device_memory(device);
  if (available >= 0 && memory.bytes > available) {
    throw InputError("the " + preset.name + " preset needs about " + format_bytes(memory.bytes) + " (" + memory.what +
                     "), more than the " + format_bytes(available) + " available on " + device.str() +
                     ": fewer or smaller --batch-sizes, or a larger device");
  }
}

}  // namespace sjd::engine
