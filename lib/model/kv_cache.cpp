#include "model/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "io/device_transfer.h"

namespace sjd::model {

KvCache::KvCache(int64_t layers, int64_t rows, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                 at::ScalarType dtype, at::Device device)
    : length_(static_cast<size_t>(rows), 0),
      valid_(static_cast<size_t>(rows)),
      valid_synced_(static_cast<size_t>(rows), 0),
      capacity_(capacity) {
  for (int64_t l = 0; l < layers; ++l) {
    k_.push_back(at::zeros({rows, kv_heads, capacity, head_dim}, at::TensorOptions().dtype(dtype).device(device)));
    v_.push_back(at::zeros({rows, kv_heads, capacity, head_dim}, at::TensorOptions().dtype(dtype).device(device)));
  }
}

KvCache::StepSlots KvCache::step_slots(const std::vector<int64_t>& rows, int64_t width) const {
  const size_t cells = rows.size() * static_cast<size_t>(width);
  std::vector<int64_t> host(2 * cells);  // the row indices, then the slot indices
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t start = length(rows[i]);
    if (start + width > capacity_) {
      throw std::out_of_range("KV cache: writing " + std::to_string(width) + " slots at " + std::to_string(start) +
                              " of row " + std::to_string(rows[i]) + " exceeds the capacity " +
                              std::to_string(capacity_));
    }
    for (int64_t j = 0; j < width; ++j) {
      host[i * static_cast<size_t>(width) + static_cast<size_t>(j)] = rows[i];
      host[cells + i * static_cast<size_t>(width) + static_cast<size_t>(j)] = start + j;
    }
  }
  const at::Device device = k_.empty() ? at::Device(at::kCPU) : k_[0].device();
  const at::Tensor both = io::upload(at::tensor(host, at::TensorOptions().dtype(at::kLong)), device);
  const int64_t n = static_cast<int64_t>(cells);
  return {both.narrow(0, 0, n), both.narrow(0, n, n)};
}

void KvCache::write(int64_t layer, const StepSlots& where, const at::Tensor& k, const at::Tensor& v) {
  // The buffers seen as [rows, capacity, kv_heads, head_dim], indexed by (row, slot).
  const int64_t n = where.rows.size(0);
  const auto scatter = [&](at::Tensor& buffer, const at::Tensor& values) {
    buffer.transpose(1, 2).index_put_({where.rows, where.slots}, values.reshape({n, values.size(2), values.size(3)}));
  };
  scatter(k_[static_cast<size_t>(layer)], k);
  scatter(v_[static_cast<size_t>(layer)], v);
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

void KvCache::commit_rows(const std::vector<RowCommit>& commits) {
  // The moves of every row: (row, from, to) cells, from > to. Gathering all sources before
  // scattering equals moving them one by one in order: kept increases from 0 or more, so
  // to = base + i <= base + kept[i], and no slot is written before it is read.
  std::vector<int64_t> move_rows, move_from, move_to;
  std::vector<uint8_t> seen(static_cast<size_t>(rows()), 0);
  for (const RowCommit& c : commits) {
    if (c.row < 0 || c.row >= rows()) throw std::out_of_range("KV cache: no row " + std::to_string(c.row));
    if (seen[static_cast<size_t>(c.row)]++) {
      throw std::invalid_argument("KV cache: row " + std::to_string(c.row) + " committed twice in one call");
    }
    if (c.valid.size() != c.kept.size()) throw std::invalid_argument("KV cache: kept and valid differ in length");
    const int64_t base = length(c.row);
    for (size_t i = 0; i < c.kept.size(); ++i) {
      const int64_t from = base + c.kept[i], to = base + static_cast<int64_t>(i);
      if ((i == 0 ? c.kept[0] < 0 : c.kept[i] <= c.kept[i - 1]) || from >= capacity_) {
        throw std::invalid_argument("KV cache: row " + std::to_string(c.row) +
                                    " keeps slots that are not increasing offsets inside the capacity");
      }
      if (from == to) continue;  // already in place (a chain window, or the spine of a tree window)
      move_rows.push_back(c.row);
      move_from.push_back(from);
      move_to.push_back(to);
    }
  }
  if (!move_rows.empty() && !k_.empty()) {
    const int64_t n = static_cast<int64_t>(move_rows.size());
    std::vector<int64_t> host = move_rows;
    host.insert(host.end(), move_from.begin(), move_from.end());
    host.insert(host.end(), move_to.begin(), move_to.end());
    const at::Tensor all = io::upload(at::tensor(host, at::TensorOptions().dtype(at::kLong)), k_[0].device());
    const at::Tensor row_index = all.narrow(0, 0, n), from_index = all.narrow(0, n, n);
    const at::Tensor to_index = all.narrow(0, 2 * n, n);
    for (size_t l = 0; l < k_.size(); ++l) {
      for (at::Tensor* buffer : {&k_[l], &v_[l]}) {
        at::Tensor by_slot = buffer->transpose(1, 2);  // [rows, capacity, kv_heads, head_dim], a view
        by_slot.index_put_({row_index, to_index}, by_slot.index({row_index, from_index}));
      }
    }
  }
  for (const RowCommit& c : commits) {
    const int64_t base = length(c.row);
    std::vector<uint8_t>& flags = valid_[static_cast<size_t>(c.row)];
    flags.resize(static_cast<size_t>(base));
    for (uint8_t v : c.valid) flags.push_back(v != 0 ? 1 : 0);
    length_[static_cast<size_t>(c.row)] += static_cast<int64_t>(c.kept.size());
  }
}

void KvCache::rollback(int64_t row, int64_t new_length) {
  if (new_length < 0 || new_length > length(row)) throw std::out_of_range("KV cache: bad rollback length");
  length_[static_cast<size_t>(row)] = new_length;
  valid_[static_cast<size_t>(row)].resize(static_cast<size_t>(new_length));
  int64_t& synced = valid_synced_[static_cast<size_t>(row)];
  synced = std::min(synced, new_length);  // the slots after it may be committed again with other flags
}

const at::Tensor& KvCache::device_key_valid() {
  const at::Device device = k_.empty() ? at::Device(at::kCPU) : k_[0].device();
  if (!valid_device_.defined()) {
    valid_device_ = at::zeros({rows(), capacity_}, at::TensorOptions().dtype(at::kByte).device(device));
  }
  // One upload: the changed slots' flat indices, then their flags.
  std::vector<int64_t> indices, flags;
  for (int64_t r = 0; r < rows(); ++r) {
    const std::vector<uint8_t>& valid = valid_[static_cast<size_t>(r)];
    int64_t& synced = valid_synced_[static_cast<size_t>(r)];
    for (int64_t j = synced; j < length(r); ++j) {
      indices.push_back(r * capacity_ + j);
      flags.push_back(valid[static_cast<size_t>(j)]);
    }
    synced = length(r);
  }
  if (indices.empty()) return valid_device_;
  const int64_t n = static_cast<int64_t>(indices.size());
  indices.insert(indices.end(), flags.begin(), flags.end());
  const at::Tensor both = io::upload(at::tensor(indices, at::TensorOptions().dtype(at::kLong)), device);
  valid_device_.view(-1).index_put_({both.narrow(0, 0, n)}, both.narrow(0, n, n).to(at::kByte));
  return valid_device_;
}

int64_t KvCache::bytes() const {
  int64_t total = valid_device_.defined() ? static_cast<int64_t>(valid_device_.nbytes()) : 0;
  for (const auto& buffers : {&k_, &v_}) {
    for (const at::Tensor& b : *buffers) total += static_cast<int64_t>(b.nbytes());
  }
  return total;
}

}  // namespace sjd::model
