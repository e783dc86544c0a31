#include "model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace sjd::model {

KvCache::KvCache(int64_t layers, int64_t rows, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                 at::ScalarType dtype, at::Device device)
    : length_(static_cast<size_t>(rows), 0), valid_(static_cast<size_t>(rows)), capacity_(capacity) {
  for (int64_t l = 0; l < layers; ++l) {
    k_.push_back(at::zeros({rows, kv_heads, capacity, head_dim}, at::TensorOptions().dtype(dtype).device(device)));
    v_.push_back(at::zeros({rows, kv_heads, capacity, head_dim}, at::TensorOptions().dtype(dtype).device(device)));
  }
}

void KvCache::write(int64_t layer, int64_t row, const at::Tensor& k, const at::Tensor& v) {
  const int64_t start = length(row);
  const int64_t count = k.size(1);
  if (start + count > capacity_) {
    throw std::out_of_range("KV cache: writing " + std::to_string(count) + " slots at " + std::to_string(start) +
                            " exceeds the capacity " + std::to_string(capacity_));
  }
  k_[static_cast<size_t>(layer)][row].narrow(1, start, count).copy_(k);
  v_[static_cast<size_t>(layer)][row].narrow(1, start, count).copy_(v);
}

at::Tensor KvCache::slots(const std::vector<at::Tensor>& buffers, int64_t layer, int64_t first, int64_t rows,
                          int64_t count) const {
  return buffers[static_cast<size_t>(layer)].narrow(0, first, rows).narrow(2, 0, count);
}

at::Tensor KvCache::keys(int64_t layer, int64_t first, int64_t rows, int64_t count) const {
  return slots(k_, layer, first, rows, count);
}

at::Tensor KvCache::values(int64_t layer, int64_t first, int64_t rows, int64_t count) const {
  return slots(v_, layer, first, rows, count);
}

void KvCache::commit(const std::vector<int64_t>& kept, uint8_t valid) {
  for (int64_t r = 0; r < rows(); ++r) commit_row(r, kept, std::vector<uint8_t>(kept.size(), valid));
}

void KvCache::commit_row(int64_t row, const std::vector<int64_t>& kept, const std::vector<uint8_t>& valid) {
  const int64_t base = length(row);
  for (size_t i = 0; i < kept.size(); ++i) {
    const int64_t from = base + kept[i];
    const int64_t to = base + static_cast<int64_t>(i);
    if (from == to) continue;  // already in place (the spine of a tree window)
    for (size_t l = 0; l < k_.size(); ++l) {
      k_[l][row].narrow(1, to, 1).copy_(k_[l][row].narrow(1, from, 1));
      v_[l][row].narrow(1, to, 1).copy_(v_[l][row].narrow(1, from, 1));
    }
  }
  std::vector<uint8_t>& flags = valid_[static_cast<size_t>(row)];
  flags.resize(static_cast<size_t>(base));
  for (uint8_t v : valid) flags.push_back(v != 0 ? 1 : 0);
  length_[static_cast<size_t>(row)] += static_cast<int64_t>(kept.size());
}

void KvCache::rollback(int64_t row, int64_t new_length) {
  if (new_length < 0 || new_length > length(row)) throw std::out_of_range("KV cache: bad rollback length");
  length_[static_cast<size_t>(row)] = new_length;
  valid_[static_cast<size_t>(row)].resize(static_cast<size_t>(new_length));
}

}  // namespace sjd::model
