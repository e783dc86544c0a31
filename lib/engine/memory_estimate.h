#pragma once
// How much memory one generation will ask for, from the model's numbers and the
// settings alone, so that a prompt, window or draft tree that cannot fit is refused
// (exit code 2, with the figure) before the KV cache or any activation is allocated
// -- instead of the process being killed half-way through, or the machine swapping.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "io/weights.h"
#include "model/transformer_config.h"

namespace sjd::engine {

// Query rows prefill attention handles at once; the estimate assumes the
// transformer's prefill never holds scores for more query rows than this.
constexpr int64_t kPrefillQueryChunk = 256;

struct MemoryEstimate {
  int64_t kv_cache = 0;  // K and V of every layer over the whole sequence, and the key mask
  int64_t window = 0;    // one decoding step: activations, attention scores, logits and their pipeline copies
  int64_t prefill = 0;   // one prompt row's prefill: activations, chunked scores, the prompt's logits
  int64_t drafts = 0;    // the draft books' distributions between steps (decoding/draft_book.h)
  int64_t graphs = 0;    // CUDA graphs of the window step: their memory pool and static inputs and outputs
  int64_t vq = 0;        // decoding a finished image's codes (between steps, while the cache lives)
  // The KV cache's shape: a model that already holds one of these rows and at least this capacity
  // keeps it (Transformer::reserve), so the generation holds that one, not a new one.
  int64_t kv_rows = 0;
  int64_t kv_capacity = 0;
  int64_t window_nodes = 0;  // draft nodes of the step it was made for (0: AR steps, which a window does not shrink)
  // The KV cache, the draft books and the graphs live throughout; prefill, window steps and VQ decodes never overlap.
  int64_t total() const;  // saturates, as each term does: a hostile shape never sums to a small figure
  // "3.2 GB (KV cache 1.1 GB, drafts 0.1 GB, window step 0.4 GB, prefill 2.1 GB)", the graphs named where counted
  std::string describe() const;
};

struct GenerationShape {
  int64_t rows = 1;            // 2 with classifier-free guidance
  int64_t longest_prompt = 0;  // tokens of the longest prompt row
  int64_t image_tokens = 0;    // tokens the layout generates
  int64_t window_nodes = 0;    // draft nodes of one step (chain + tree)
  int64_t sequences = 1;       // images decoded at once (rows / rows per image)
  int64_t draft_distributions = 0;  // float [vocab] rows each sequence's draft book keeps
  bool step_graphs = false;    // window steps replayed from CUDA graphs (model/step_graphs.h)
  int64_t head_rows = 0;       // output rows a step computes (a restricted head); 0: the whole vocabulary
  int64_t vq_decode = 0;       // bytes one image's VQ decode works in (vq_decode_bytes)
};

// The working memory of one VQ decode of a grid_height x grid_width code grid: a few float
// tensors at the output resolution with the decoder's widest channel count there, and the
// attention scores over the codes at the lowest resolution.
int64_t vq_decode_bytes(int64_t grid_height, int64_t grid_width, int64_t downsample, int64_t top_channels);

MemoryEstimate estimate_generation_memory(const model::TransformerConfig& config, const GenerationShape& shape,
                                          at::ScalarType dtype);

// Bytes this process may still allocate on the CPU: the smaller of the
// machine's available memory (/proc/meminfo) and what an address-space limit
// (ulimit -v) leaves less 64 MiB a thread (at most 8) for the libraries' own
// mappings, and never below 0; -1 when neither is known.
int64_t available_host_memory();

// Throws InputError "<needs>, more than the <available> of memory available" when `bytes` exceed
// available_host_memory() (unknown: no check). `needs` says what needs them ("X: decoding a 64x64
// grid of codes needs about 1.20 GB").
void check_host_memory_fits(int64_t bytes, const std::string& needs);

// Bytes a generation may still allocate on a GPU: the device's free memory and what
// PyTorch's allocator holds unused, less a margin for what is allocated outside it (the
// CUDA context's kernels, loaded as they are first used); -1 where unknown (no CUDA).
int64_t available_device_memory(const at::Device& device);

// Throws InputError when `estimate` exceeds `limit` (bytes; 0 = what the device has
// available -- the machine's memory for the CPU, the free memory of a GPU -- plus `reusable`,
// what the model already holds that the generation takes over: its previous KV cache), naming both figures.
void check_memory_fits(const MemoryEstimate& estimate, int64_t limit, const at::Device& device, int64_t reusable = 0);

// Bytes the transformer's weights take on the run's device in `dtype`: loading copies every tensor there
// (model/transformer_weights.h fuses q/k/v and gate/up into new tensors), while the files' own pages are
// mapped and need no memory of their own.
int64_t transformer_weight_bytes(const io::WeightMap& weights, at::ScalarType dtype);

// Throws InputError when `bytes` of weights (transformer_weight_bytes) exceed `available` (bytes;
// negative: unknown, no check), naming both figures and, for float32, that bf16 halves them.
void check_weights_fit(int64_t bytes, int64_t available, const at::Device& device, at::ScalarType dtype);

// "8G", "512M", "1.5GB", "1000000" -> bytes; throws std::invalid_argument naming --max-memory.
int64_t parse_memory_size(const std::string& text);

std::string format_bytes(int64_t bytes);  // "1.20 GB", "340.00 MB", "1.02 kB", "512 bytes"

}  // namespace sjd::engine
