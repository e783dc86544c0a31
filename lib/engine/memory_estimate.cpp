#include "engine/memory_estimate.h"

#include <sys/resource.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#ifdef SJD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "engine/bundle.h"
#include "engine/device.h"
#include "model/step_graphs.h"

namespace sjd::engine {
namespace {

// Saturating arithmetic: a hostile prompt length or window must give a huge
// estimate, never an overflowed small one.
constexpr int64_t kHuge = int64_t{1} << 62;

int64_t mul(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (product > kHuge / f) return kHuge;
    product *= f;
  }
  return product;
}

int64_t add(std::initializer_list<int64_t> terms) {
  int64_t sum = 0;
  for (int64_t t : terms) {
    t = std::min(kHuge, t);
    sum = sum > kHuge - t ? kHuge : sum + t;  // two saturated terms would overflow int64 when added
  }
  return sum;
}

// The activations of `tokens` positions through one layer (hidden states,
// q/k/v, the MLP's gate/up/product) and the logits with the pipeline's copies
// (CFG mix, temperature, top-k, softmax: about four float tensors).
int64_t activations(const model::TransformerConfig& c, int64_t tokens, int64_t key_slots, int64_t query_rows,
                    int64_t logit_rows, int64_t element) {
  const int64_t hidden = mul({tokens, c.hidden_size, element, 6});
  const int64_t qkv = mul({tokens, (c.num_heads + 2 * c.num_kv_heads) * c.head_dim, element, 2});
  const int64_t mlp = mul({tokens, c.intermediate_size, element, 3});
  // Scores and their softmax, in float, plus the boolean mask.
  const int64_t scores = add({mul({c.num_heads, query_rows, key_slots, 4, 2}), mul({query_rows, key_slots})});
  const int64_t logits = mul({logit_rows, c.vocab_size, 4, 4});
  return add({hidden, qkv, mlp, scores, logits});
}

int64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

int64_t address_space_used() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return 0;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(bytes >= (int64_t{1} << 40) ? 3 : 2);
  if (bytes >= kHuge) {
    out << "more than 4 EB";
  } else if (bytes >= 1000LL * 1000 * 1000) {
    out << std::fixed << static_cast<double>(bytes) / 1e9 << " GB";
  } else if (bytes >= 1000 * 1000) {
    out << std::fixed << static_cast<double>(bytes) / 1e6 << " MB";
  } else if (bytes >= 1000) {  // --max-memory 1K: "0.00 MB" would say nothing
    out << std::fixed << static_cast<double>(bytes) / 1e3 << " kB";
  } else {
    out << bytes << " bytes";
  }
  return out.str();
}

int64_t MemoryEstimate::total() const { return add({kv_cache, drafts, graphs, std::max({window, prefill, vq})}); }

std::string MemoryEstimate::describe() const {
  return format_bytes(total()) + " (KV cache " + format_bytes(kv_cache) + ", drafts " + format_bytes(drafts) +
         (graphs > 0 ? ", step graphs " + format_bytes(graphs) : "") + ", window step " + format_bytes(window) +
         ", prefill " + format_bytes(prefill) + (vq > 0 ? ", VQ decode " + format_bytes(vq) : "") + ")";
}

MemoryEstimate estimate_generation_memory(const model::TransformerConfig& c, const GenerationShape& s,
                                          at::ScalarType dtype) {
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  // The decoder sizes the cache as prompt + image + one window's slots per row (a graphed window
  // padded: TokenModel::window_slots).
  const int64_t window_slots = s.step_graphs ? model::StepGraphs::padded_width(add({1, s.window_nodes}))
                                             : add({1, s.window_nodes});
  const int64_t capacity = add({s.longest_prompt, s.image_tokens, window_slots});
  MemoryEstimate e;
  e.kv_rows = s.rows;
  e.window_nodes = s.window_nodes;
  e.kv_capacity = capacity;
  e.kv_cache = add({mul({2, c.num_layers, s.rows, c.num_kv_heads, capacity, c.head_dim, element}),
                    mul({s.rows, capacity})});
  // A graphed window step runs at its padded width, its eager warm-up too.
  const int64_t width = add({1, s.window_nodes});
  const int64_t run = mul({s.rows, window_slots});
  e.window = activations(c, run, capacity, run, run, element);
  const int64_t prompt = s.longest_prompt;
  e.prefill = activations(c, prompt, prompt, std::min(prompt, kPrefillQueryChunk), prompt, element);
  e.drafts = mul({s.sequences, s.draft_distributions, c.vocab_size, 4});
  e.vq = s.vq_decode;
  if (s.step_graphs) {
    // The graphs' pool keeps a step's temporaries beside the eager steps' own, and each shape
    // keeps its static inputs and output: the bias over the capacity, the logits of the head's
    // rows in float, tokens, positions and KV indices; one shape per padded width up to the window's.
    const int64_t head = s.head_rows > 0 ? s.head_rows : c.vocab_size;
    std::set<int64_t> widths;
    for (int64_t w = 1; w <= width && widths.size() < model::StepGraphs::kMaxShapes;
         w = model::StepGraphs::padded_width(w) + 1) {
      widths.insert(model::StepGraphs::padded_width(w));
    }
    e.graphs = e.window;
    for (int64_t w : widths) {
      e.graphs = add({e.graphs, mul({s.rows, w, add({mul({capacity, element}), mul({head, 4}), 32})})});
    }
  }
  return e;
}

int64_t vq_decode_bytes(int64_t grid_height, int64_t grid_width, int64_t downsample, int64_t top_channels) {
  const int64_t pixels = mul({grid_height, downsample, grid_width, downsample});
  const int64_t codes = mul({grid_height, grid_width});
  // About six tensors alive at once in a full-resolution residual block (input, norm, swish,
  // convolution output, the block's sum, a convolution's workspace), and the mid block's
  // attention scores and their softmax in float.
  return add({mul({6, pixels, top_channels, 4}), mul({2, codes, codes, 4})});
}

int64_t available_device_memory(const at::Device& device) {
#ifdef SJD_WITH_CUDA
  if (!device.is_cuda()) return -1;
  const c10::cuda::CUDAGuard guard(device);
  // The caching allocator is set up by the first allocation on the device; before it, its
  // statistics are refused ("Invalid device argument: did you call init?"). First, so that the
  // free memory read next already lacks that allocation's segment.
  (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(device));
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: nothing later should see it
    return -1;
  }
  // The guard's device: "cuda" has no index.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  const int64_t held_unused = stats.reserved_bytes[all].current - stats.allocated_bytes[all].current;
  constexpr int64_t kMargin = int64_t{1} << 30;  // the context's lazily loaded kernels, library handles
  return std::max<int64_t>(static_cast<int64_t>(free) + std::max<int64_t>(held_unused, 0) - kMargin, 0);
#else
  (void)device;
  return -1;
#endif
}

int64_t available_host_memory() {
  int64_t available = meminfo_available();
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    // An address-space limit also counts what the libraries map beside our tensors as they run: oneDNN's
    // JIT code and reordered copies, and for each thread its stack and a malloc arena (64 MiB reserved).
    // Without this margin the default model passed the check by tens of MB and then LibTorch aborted the
    // process (exit code 134) in the VQ decode, the more often the more threads. Counted for at most 8
    // threads, and never below nothing left (a negative figure would read as "unknown": no check at all).
    const int64_t threads = std::clamp<int64_t>(at::get_num_threads(), 1, 8);
    const int64_t headroom = std::max<int64_t>(
        static_cast<int64_t>(limit.rlim_cur) - address_space_used() - (int64_t{64} << 20) * threads, 0);
    available = available < 0 ? headroom : std::min(available, headroom);
  }
  return available;
}

int64_t transformer_weight_bytes(const io::WeightMap& weights, at::ScalarType dtype) {
  int64_t bytes = 0;
  for (const std::string& name : weights.names()) {
    bytes = add({bytes, mul({weights.get(name).numel(), static_cast<int64_t>(c10::elementSize(dtype))})});
  }
  return bytes;
}

void check_weights_fit(int64_t bytes, int64_t available, const at::Device& device, at::ScalarType dtype) {
  if (available < 0 || bytes <= available) return;
  throw InputError("the transformer's weights take " + format_bytes(bytes) + " as " + dtype_name(dtype) + " on " +
                   device.str() + ", more than the " + format_bytes(available) + " of memory available" +
                   (dtype == at::kFloat ? " (--dtype bf16 takes half)" : ""));
}

void check_host_memory_fits(int64_t bytes, const std::string& needs) {
  const int64_t available = available_host_memory();
  if (available >= 0 && bytes > available) {
    throw InputError(needs + ", more than the " + format_bytes(available) + " of memory available");
  }
}

void check_memory_fits(const MemoryEstimate& estimate, int64_t limit, const at::Device& device, int64_t reusable) {
  std::string against = "--max-memory " + format_bytes(limit);
  if (limit <= 0) {
    limit = device.is_cpu() ? available_host_memory() : available_device_memory(device);
    if (limit < 0) return;  // unknown: nothing to hold the estimate against
    limit = add({limit, std::max<int64_t>(reusable, 0)});
    against = "the " + format_bytes(limit) + " of memory available" + (device.is_cpu() ? "" : " on " + device.str());
  }
  if (estimate.total() > limit) {
    throw InputError("this generation needs about " + estimate.describe() + ", more than " + against +
                     "; use a shorter prompt, " +
                     (estimate.window_nodes > 0 ? "a smaller --window or draft tree, " : "") + "or raise --max-memory");
  }
}

int64_t parse_memory_size(const std::string& text) {
  const auto bad = [&]() {
    return std::invalid_argument("--max-memory: expected a size such as 8G, 512M or 1000000 bytes (got \"" + text +
                                 "\")");
  };
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  double scale = 1.0;
  if (unit == "K" || unit == "k") scale = 1e3;
  else if (unit == "M" || unit == "m") scale = 1e6;
  else if (unit == "G" || unit == "g") scale = 1e9;
  else if (unit == "T" || unit == "t") scale = 1e12;
  else if (!unit.empty()) throw bad();
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 1.0 || bytes > 1e18) throw bad();
  return static_cast<int64_t>(bytes);
}

}  // namespace sjd::engine
