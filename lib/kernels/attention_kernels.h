#pragma once
// Launcher of the window attention kernels (window_attention.cu, window_attention_mma.cu),
// over raw device pointers; plain C++ like kernels.h.
//
// Why it exists: a graphed step has fixed shapes, so PyTorch's attention reads
// the KV cache's whole capacity and masks the keys past each row's length. At
// an AR step cuDNN's kernel does that at near the copy bandwidth, which is
// twice the bytes a mid-image step needs (Lumina 7B on an H200: 0.83 ms of a
// 6.1 ms step; 16 CFG pairs: most of a 14 ms step). This kernel takes the same
// inputs as scaled_dot_product_attention with an additive bias, but splits the
// keys into chunks of kWindowAttentionChunk, and a chunk whose bias blocks
// every query reads no key or value: the lengths live in the bias, on the
// device, so a replayed graph reads only the keys its rows have. Steps of few
// query vectors per K/V head (AR, small windows) run on CUDA cores, in any
// floating type; wider ones (L = 64 chains, trees) on tensor cores, in bfloat16
// or float16, 512 keys a block (window_attention_mma.cu).
#include <cstdint>

#include "kernels/layer_kernels.h"

namespace sjd::kernels {

constexpr int kWindowAttentionChunk = 256;       // keys per block on CUDA cores
constexpr int kWindowAttentionWideChunk = 512;   // keys per block on tensor cores (64 at a time)
constexpr int kWindowAttentionMaxQueries = 16;   // heads per K/V head x window slots that go to CUDA cores
constexpr int kWindowAttentionMaxDim = 128;      // head size: a power of two from 8 (16 on tensor cores)

// softmax(q k^T * scale + bias) v. Strides are in elements; every last dimension is contiguous,
// and rows of q, K, V and the bias start 16-byte aligned (the launcher's caller checks).
struct WindowAttentionArgs {
  ElementType type = ElementType::kFloat32;  // of q, K, V, the bias and the output
  const void* q = nullptr;                   // [rows, heads, W, D]
  int64_t q_row = 0, q_head = 0, q_slot = 0;
  const void* keys = nullptr;                // [rows, kv_heads, S, D]
  const void* values = nullptr;              // same shape and strides as keys
  int64_t kv_row = 0, kv_head = 0, kv_slot = 0;
  const void* bias = nullptr;                // [rows, 1, W, S]: 0 where a query may see a key, -inf where not
  int64_t bias_row = 0, bias_slot = 0;
  int rows = 0, heads = 0, kv_heads = 0, width = 0, dim = 0;
  int64_t keys_count = 0;                    // S
  float scale = 1.0f;
  // Scratch of window_attention_scratch_floats() floats: each chunk's partial output, max and sum.
  float* scratch = nullptr;
  void* out = nullptr;                       // out [rows, W, heads, D], contiguous
};

// Whether the step goes to tensor cores (more than kWindowAttentionMaxQueries query vectors per K/V head).
bool window_attention_on_tensor_cores(const WindowAttentionArgs& args);
// Whether the kernels take the step's shape and element type (the launcher throws otherwise).
bool window_attention_takes_shape(const WindowAttentionArgs& args);
int64_t window_attention_scratch_floats(const WindowAttentionArgs& args);
void launch_window_attention(const WindowAttentionArgs& args, StreamHandle stream);

}  // namespace sjd::kernels
