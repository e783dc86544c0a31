#include "engine/memory_estimate.h"

#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/bundle.h"

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
  for (int64_t t : terms) sum = std::min(kHuge, sum + std::min(kHuge, t));
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
  } else {
    out << std::fixed << static_cast<double>(bytes) / 1e6 << " MB";
  }
  return out.str();
}

std::string MemoryEstimate::describe() const {
  return format_bytes(total()) + " (KV cache " + format_bytes(kv_cache) + ", drafts " + format_bytes(drafts) +
         ", window step " + format_bytes(window) + ", prefill " + format_bytes(prefill) + ")";
}

MemoryEstimate estimate_generation_memory(const model::TransformerConfig& c, const GenerationShape& s,
                                          at::ScalarType dtype) {
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  // Transformer::start sizes the cache as prompt + image + window + 1 slots per row.
  const int64_t capacity = add({s.longest_prompt, s.image_tokens, s.window_nodes, 1});
  MemoryEstimate e;
  e.kv_cache = add({mul({2, c.num_layers, s.rows, c.num_kv_heads, capacity, c.head_dim, element}),
                    mul({s.rows, capacity})});
  const int64_t width = add({1, s.window_nodes});
  e.window = activations(c, mul({s.rows, width}), capacity, mul({s.rows, width}), mul({s.rows, width}), element);
  const int64_t prompt = s.longest_prompt;
  e.prefill = activations(c, prompt, prompt, std::min(prompt, kPrefillQueryChunk), prompt, element);
  e.drafts = mul({s.sequences, s.draft_distributions, c.vocab_size, 4});
  return e;
}

int64_t available_host_memory() {
  int64_t available = meminfo_available();
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t headroom = static_cast<int64_t>(limit.rlim_cur) - address_space_used();
    available = available < 0 ? headroom : std::min(available, headroom);
  }
  return available;
}

void check_memory_fits(const MemoryEstimate& estimate, int64_t limit, const at::Device& device) {
  std::string against = "--max-memory " + format_bytes(limit);
  if (limit <= 0) {
    if (!device.is_cpu()) return;  // GPU memory is only checked against --max-memory
    limit = available_host_memory();
    against = "the " + format_bytes(std::max<int64_t>(limit, 0)) + " of memory available";
    if (limit < 0) return;
  }
  if (estimate.total() > limit) {
    throw InputError("this generation needs about " + estimate.describe() + ", more than " + against +
                     "; use a shorter prompt, a smaller --window or draft tree, or raise --max-memory");
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
