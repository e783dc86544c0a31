#pragma once
// The additive attention bias of one forward, [rows, 1, W, keys] of 0 (may attend) or -inf,
// shared by every layer: each row's committed keys as the KV cache marks them valid, then the
// step's window (chain or tree) after the row's own length; keys past that are blocked.
//
// Two builders of the same bias. The CPU fills it on the host, where the flags live. A GPU
// builds it on the device from the cache's device copy of the flags, the rows' lengths and
// the window masks: a host-built bias of 32 rows x 64 queries x 2,500 keys is 20 MB to fill
// and upload at every step, which would keep the host, not the GPU, the bottleneck of a
// batched step.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace sjd::model {

// Where the bias's rows live in memory: `keys` columns used of `stride` (>= keys) allocated,
// so that a GPU kernel can be given rows that start 16-element aligned.
struct BiasShape {
  int64_t width = 1;   // W: the window's slots, the queries of every row
  int64_t keys = 0;    // >= every row's length + W
  int64_t stride = 0;  // >= keys
};

// On the host, float32, in `buffer` (reused between steps; the tensor views it). `window_mask`:
// [rows][W][W] flattened, 1 where query q may see window slot j.
at::Tensor host_attention_bias(const KvCache& cache, const std::vector<int64_t>& rows, const BiasShape& shape,
                               const std::vector<uint8_t>& window_mask, std::vector<float>& buffer);

// With tensor operations on the inputs' device, in `dtype`: `key_valid` [rows, >= keys] uint8 (the
// rows' flags, stale past their lengths), `lengths` [rows] int64, `window_mask` [rows, W, W] uint8.
at::Tensor device_attention_bias(const at::Tensor& key_valid, const at::Tensor& lengths,
                                 const at::Tensor& window_mask, const BiasShape& shape, at::ScalarType dtype);

}  // namespace sjd::model
