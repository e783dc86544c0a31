#pragma once
// Launchers of the transformer layer's fused elementwise kernels (layer_ops.cu),
// over raw device pointers; plain C++ like kernels.h. In a decode step of a 7B
// model every elementwise ATen op is a kernel of its own over a few kilobytes:
// at a CFG pair's AR step about 25 kernels per layer, most of them the norms,
// RoPE, the KV write and the residual adds (docs/gpu.md). These fold each group
// into one kernel. Each rounds to the element type where the ATen composition it
// replaces rounds (in bfloat16: the RMS norm once, after its weight, as ATen's
// fused RMS norm; the qk LayerNorm before its affine step and after it; each
// RoPE product and their sum; each residual sum), so its results match that
// composition up to the order of the norms' sums; tests/cuda/test_layer_ops_cuda.cpp
// holds them to it.
#include <cstdint>

namespace sjd::kernels {

using StreamHandle = void*;  // cudaStream_t

enum class ElementType : int { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// Per token t of [tokens, hidden]: sum = x + delta (rounded), normed = sum / rms(sum) * weight.
struct AddRmsNormArgs {
  ElementType type = ElementType::kFloat32;
  const void* x = nullptr;       // [tokens, hidden]
  const void* delta = nullptr;   // [tokens, hidden]; null: sum = x (a plain RMS norm)
  const void* weight = nullptr;  // [hidden]
  int64_t tokens = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  void* sum = nullptr;           // out [tokens, hidden] (may be null when delta is null)
  void* normed = nullptr;        // out [tokens, hidden]
};
void launch_add_rms_norm(const AddRmsNormArgs& args, StreamHandle stream);

// SwiGLU's product: out[t, i] = silu(gate_up[t, i]) * gate_up[t, inner + i].
struct SiluMulArgs {
  ElementType type = ElementType::kFloat32;
  const void* gate_up = nullptr;  // [tokens, 2 * inner]
  int64_t tokens = 0;
  int64_t inner = 0;
  void* out = nullptr;            // out [tokens, inner]
};
void launch_silu_mul(const SiluMulArgs& args, StreamHandle stream);

// After the qkv projection, per (cell, head) of qkv [cells, heads + 2 kv_heads, dim]
// with cells = rows x width (row-major): q and k heads get Chameleon's qk-norm
// (LayerNorm over dim with a per-head affine; skipped when norm_weight is null)
// and RoPE (x cos + partner(x) signed_sin, partner swapping halves, or neighbours
// for 2D RoPE); q goes to q_out [rows, width, heads, dim] (the qkv's own order);
// k and v go to the KV cache at (slot_row, slot_index) of their cell.
struct QkvPrologueArgs {
  ElementType type = ElementType::kFloat32;
  const void* qkv = nullptr;          // [cells, heads + 2 kv_heads, dim]
  int rows = 0;
  int width = 0;
  int heads = 0;
  int kv_heads = 0;
  int dim = 0;                        // even; at most kMaxHeadDim
  const void* norm_weight = nullptr;  // [heads + kv_heads, dim] or null
  const void* norm_bias = nullptr;    // [heads + kv_heads, dim] (with norm_weight)
  float norm_eps = 1e-5f;
  const void* cos = nullptr;          // [cells, dim]
  const void* signed_sin = nullptr;   // [cells, dim]
  bool rope_2d = false;
  void* q_out = nullptr;              // out [rows, width, heads, dim]
  void* k_cache = nullptr;            // [cache rows, kv_heads, capacity, dim]
  void* v_cache = nullptr;            // same layout
  int64_t capacity = 0;
  const int64_t* slot_row = nullptr;    // [cells]
  const int64_t* slot_index = nullptr;  // [cells]
};
constexpr int kMaxHeadDim = 512;
void launch_qkv_prologue(const QkvPrologueArgs& args, StreamHandle stream);

}  // namespace sjd::kernels
