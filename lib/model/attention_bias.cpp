#include "model/attention_bias.h"

#include <algorithm>
#include <limits>

namespace sjd::model {

at::Tensor host_attention_bias(const KvCache& cache, const std::vector<int64_t>& rows, const BiasShape& shape,
                               const std::vector<uint8_t>& window_mask, std::vector<float>& buffer) {
  const int64_t width = shape.width, stride = shape.stride;
  const float blocked = -std::numeric_limits<float>::infinity();
  buffer.assign(rows.size() * static_cast<size_t>(width * stride), blocked);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<uint8_t>& valid = cache.key_valid(rows[i]);
    const int64_t committed = static_cast<int64_t>(valid.size());
    const uint8_t* window = window_mask.data() + i * static_cast<size_t>(width * width);
    // Every query of the row sees the same committed keys: made once, copied to the others.
    float* first = buffer.data() + static_cast<int64_t>(i) * width * stride;
    for (int64_t j = 0; j < committed; ++j) first[j] = valid[static_cast<size_t>(j)] ? 0.0f : blocked;
    for (int64_t q = 0; q < width; ++q) {
      float* out = first + q * stride;
      if (q > 0) std::copy(first, first + committed, out);
      for (int64_t j = 0; j < width; ++j) out[committed + j] = window[q * width + j] ? 0.0f : blocked;
    }
  }
  return at::from_blob(buffer.data(), {static_cast<int64_t>(rows.size()), 1, width, stride}, at::kFloat)
      .narrow(3, 0, shape.keys);
}

at::Tensor device_attention_bias(const at::Tensor& key_valid, const at::Tensor& lengths,
                                 const at::Tensor& window_mask, const BiasShape& shape, at::ScalarType dtype) {
  const int64_t rows = lengths.size(0), width = shape.width, keys = shape.keys;
  const at::TensorOptions options = at::TensorOptions().dtype(dtype).device(lengths.device());
  const at::Tensor open = at::zeros({}, options);
  const at::Tensor blocked = at::full({}, -std::numeric_limits<float>::infinity(), options);
  // The committed part, the same for every query of a row: a valid flag below the row's length.
  const at::Tensor slot = at::arange(keys, lengths.options());
  const at::Tensor committed =
      key_valid.narrow(1, 0, keys).to(at::kBool).logical_and(slot.unsqueeze(0) < lengths.unsqueeze(1));
  at::Tensor bias = at::empty({rows, 1, width, shape.stride}, options).narrow(3, 0, keys);
  bias.copy_(at::where(committed, open, blocked).view({rows, 1, 1, keys}).expand({rows, 1, width, keys}));
  // The window's W columns start at each row's own length: scattered there, query by query.
  const at::Tensor columns =
      (lengths.view({rows, 1, 1, 1}) + at::arange(width, lengths.options()).view({1, 1, 1, width}))
          .expand({rows, 1, width, width});
  const at::Tensor window = at::where(window_mask.to(at::kBool).view({rows, 1, width, width}), open, blocked);
  return bias.scatter_(3, columns, window);
}

}  // namespace sjd::model
