#pragma once
// The small host arrays of one GPU step -- a verification's draft tokens, q
// pointer tables, depths and child tables, and the initial values of its
// outputs -- sent in one upload, where each used to be an upload of its own and
// each output a fill kernel (about twenty host calls per window). Every array
// sits at a 16-byte aligned offset of one byte buffer, staged in page-locked
// memory and copied asynchronously (io::upload); after send() each array is a
// view of the one device buffer. On the CPU the buffer stays where it is.
// Header-only, as device_transfer.h, so that every area can use it.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "io/device_transfer.h"

namespace sjd::io {

class StepUpload {
 public:
  // Adds an array of trivially copyable values; returns its index.
  template <typename T>
  size_t add(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t index = reserve(values.size(), sizeof(T));
    if (!values.empty()) std::memcpy(host_.data() + entries_[index].offset, values.data(), values.size() * sizeof(T));
    return index;
  }
  // Adds `count` copies of `value` (an output's initial value); returns its index.
  template <typename T>
  size_t add_filled(size_t count, T value) {
    return add(std::vector<T>(count, value));
  }

  // Copies every array to `device` in one upload. Nothing can be added after it.
  void send(at::Device device) {
    if (buffer_.defined()) throw std::logic_error("StepUpload: sent twice");
    // At least one byte, so that every array (an empty one included) has an address inside the buffer.
    host_.resize(std::max<size_t>(host_.size(), 1));
    const at::Tensor host =
        at::from_blob(host_.data(), {static_cast<int64_t>(host_.size())}, at::TensorOptions().dtype(at::kByte));
    // io::upload stages a copy before it returns; on the CPU keep a copy of our own, not a view of host_.
    buffer_ = device.is_cpu() ? host.clone() : upload(host, device);
  }

  // Array `index` as a tensor of `dtype` (whose element size it was added with), on the device after send().
  at::Tensor tensor(size_t index, at::ScalarType dtype) const {
    check_sent(index);
    const Entry& e = entries_[index];
    if (c10::elementSize(dtype) != e.element_size) {
      throw std::invalid_argument("StepUpload: array " + std::to_string(index) + " holds " +
                                  std::to_string(e.element_size) + "-byte values, not " +
                                  std::string(c10::toString(dtype)));
    }
    const auto bytes = static_cast<int64_t>(e.count * e.element_size);
    return buffer_.narrow(0, static_cast<int64_t>(e.offset), bytes).view(dtype);
  }
  // Its address on the device (after send()).
  template <typename T>
  T* data(size_t index) const {
    check_sent(index);
    if (sizeof(T) != entries_[index].element_size) {
      throw std::invalid_argument("StepUpload: array " + std::to_string(index) + " holds " +
                                  std::to_string(entries_[index].element_size) + "-byte values, read as " +
                                  std::to_string(sizeof(T)) + "-byte ones");
    }
    return reinterpret_cast<T*>(static_cast<uint8_t*>(buffer_.data_ptr()) + entries_[index].offset);
  }

 private:
  struct Entry {
    size_t offset = 0;
    size_t count = 0;
    size_t element_size = 0;
  };
  static constexpr size_t kAlignment = 16;

  size_t reserve(size_t count, size_t element_size) {
    if (buffer_.defined()) throw std::logic_error("StepUpload: an array added after send()");
    const size_t offset = (host_.size() + kAlignment - 1) / kAlignment * kAlignment;
    host_.resize(offset + count * element_size);
    entries_.push_back({offset, count, element_size});
    return entries_.size() - 1;
  }
  void check_sent(size_t index) const {
    if (!buffer_.defined()) throw std::logic_error("StepUpload: read before send()");
    if (index >= entries_.size()) {
      throw std::out_of_range("StepUpload: array " + std::to_string(index) + " of " + std::to_string(entries_.size()));
    }
  }

  std::vector<uint8_t> host_;
  std::vector<Entry> entries_;
  at::Tensor buffer_;  // defined once sent
};

}  // namespace sjd::io
