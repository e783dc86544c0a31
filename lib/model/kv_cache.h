#pragma once
// A static KV cache: one [rows, kv_heads, capacity, head_dim] buffer per layer
// for K and for V, allocated once for the whole sequence. Each row has its own
// committed length; a window is written right after it, so dropping a window is
// free (the next window overwrites it) and keeping a tree path needs copies only
// for nodes that are not already in place (the spine is laid out first).
#include <ATen/ATen.h>

#include <vector>

namespace sjd::model {

class KvCache {
 public:
  KvCache() = default;
  KvCache(int64_t layers, int64_t rows, int64_t kv_heads, int64_t capacity, int64_t head_dim, at::ScalarType dtype,
          at::Device device = at::Device(at::kCPU));

  int64_t rows() const { return static_cast<int64_t>(length_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return static_cast<int64_t>(k_.size()); }
  int64_t length(int64_t row) const { return length_[static_cast<size_t>(row)]; }
  // The bytes its buffers take (K and V of every layer, the device copy of the key flags).
  int64_t bytes() const;

  // Where a step's new keys go: slots length(row) .. length(row) + width - 1 of each
  // of `rows`, as (row, slot) index tensors on the cache's device. Made once per
  // step and used by every layer. Throws if a row would run past the capacity.
  struct StepSlots {
    at::Tensor rows;   // [rows.size() * width]
    at::Tensor slots;  // [rows.size() * width]
  };
  StepSlots step_slots(const std::vector<int64_t>& rows, int64_t width) const;
  // Writes k, v ([rows, width, kv_heads, head_dim], in the order of step_slots' rows)
  // of `layer` at those slots: one scatter per buffer for the whole batch, not a copy per row.
  void write(int64_t layer, const StepSlots& where, const at::Tensor& k, const at::Tensor& v);
  // The whole K and V buffers of `layer`, [rows, kv_heads, capacity, head_dim] (contiguous), for a
  // kernel that writes a step's slots itself (model/fused_layer_ops.h) instead of write().
  at::Tensor& key_buffer(int64_t layer) { return k_[static_cast<size_t>(layer)]; }
  at::Tensor& value_buffer(int64_t layer) { return v_[static_cast<size_t>(layer)]; }
  // Keys/values of slots [0, count) of the consecutive rows [first, first + rows), a view
  // (nothing is copied): [rows, kv_heads, count, head_dim].
  at::Tensor keys(int64_t layer, int64_t first, int64_t rows, int64_t count) const;
  at::Tensor values(int64_t layer, int64_t first, int64_t rows, int64_t count) const;
  // Key validity of a row's committed slots (1: later tokens may attend; prompt
  // slots may be masked out for every later query: LlamaGen caption padding, CFG dummies).
  const std::vector<uint8_t>& key_valid(int64_t row) const { return valid_[static_cast<size_t>(row)]; }
  // The same flags on the cache's device, [rows, capacity] uint8: slot j of row r holds key_valid(r)[j] for
  // j < length(r); later slots are stale (a bias masks them by length). A GPU step builds its attention bias
  // from this copy rather than uploading a bias of rows x window x keys floats; each call uploads only the
  // flags committed since the last one (and again those after a rollback).
  const at::Tensor& device_key_valid();

  // What a row keeps of its last window: slots `kept` (offsets from length(row), increasing), with
  // their key validity `valid` (1 for generated tokens).
  struct RowCommit {
    int64_t row = 0;
    std::vector<int64_t> kept;
    std::vector<uint8_t> valid;
  };
  // Keeps each named row's slots, moving them to be contiguous, and advances the lengths. The slots
  // that move (a tree window's kept nodes off its spine) move with one gather and one scatter per
  // buffer for all rows together: on a GPU a step's commit is 4 x layers kernels at most, not a copy
  // per moved slot, layer and row. A row may appear once.
  void commit_rows(const std::vector<RowCommit>& commits);
  void commit_row(int64_t row, const std::vector<int64_t>& kept, const std::vector<uint8_t>& valid) {
    commit_rows({{row, kept, valid}});
  }
  // Moves a row's length back (drops committed tokens), e.g. to re-run a suffix.
  void rollback(int64_t row, int64_t new_length);

 private:
  at::Tensor slots(const std::vector<at::Tensor>& buffers, int64_t layer, int64_t first, int64_t rows,
                   int64_t count) const;

  std::vector<at::Tensor> k_, v_;  // per layer
  std::vector<int64_t> length_;
  std::vector<std::vector<uint8_t>> valid_;  // per row: validity of the committed slots
  at::Tensor valid_device_;                  // device_key_valid(), made at its first call
  std::vector<int64_t> valid_synced_;        // per row: leading slots of valid_device_ that equal valid_
  int64_t capacity_ = 0;
};

}  // namespace sjd::model
