// The CUDA logits pipeline on a restricted output head's columns
// (cuda::run_logits_pipeline_on_columns). The head's tokens are the only ones a
// slot can draw: every other logit is the lowest float, whose probability is 0
// after any CFG mix, mask, temperature or top-k. Running the kernel on the
// columns alone (Lumina: 8198 of 65536; Emu3: 32772 of 184622) cuts its radix
// selection and softmax to that width. Compiled only with SJD_WITH_CUDA.
#ifdef SJD_WITH_CUDA

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "io/device_transfer.h"
#include "io/step_upload.h"
#include "sampling/cuda_ops.h"

namespace sjd::sampling::cuda {
namespace {

// One column list on one device: each token's column (-1: none), the ids on the device, and the
// masks seen so far cut to the columns (a decode asks with the same list and image mask every step).
struct Columns {
  std::vector<int64_t> ids;
  std::vector<int32_t> column_of;  // [vocab]
  at::Tensor host_ids, on_device;  // int64 [V']
  struct Mask {
    at::Tensor host;      // kept, so its address cannot be reused by another mask while cached
    at::Tensor compact;   // uint8 [V'] on the device
    bool any = false;     // it allows at least one column
  };
  std::map<const void*, Mask> masks;
};

// The cached Columns for `ids` (rebuilt when the list changes), or null when the ids are not
// ascending ids below `vocab`. The caller holds `lock`.
std::mutex lock;
Columns* columns_for(const std::vector<int64_t>& ids, int64_t vocab, at::Device device) {
  // Never destroyed: device tensors freed after CUDA's own teardown at exit can crash.
  static auto& cache = *new std::map<std::pair<int, int64_t>, std::unique_ptr<Columns>>();
  std::unique_ptr<Columns>& entry = cache[{device.index(), vocab}];
  if (entry && entry->ids == ids) return entry.get();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab || (i > 0 && ids[i] <= ids[i - 1])) return nullptr;
  }
  auto made = std::make_unique<Columns>();
  made->ids = ids;
  made->column_of.assign(static_cast<size_t>(vocab), -1);
  for (size_t i = 0; i < ids.size(); ++i) made->column_of[static_cast<size_t>(ids[i])] = static_cast<int32_t>(i);
  made->host_ids = at::tensor(ids, at::TensorOptions().dtype(at::kLong));
  made->on_device = io::upload(made->host_ids, device);
  entry = std::move(made);
  return entry.get();
}

const Columns::Mask& compact_mask(Columns& columns, const at::Tensor& allowed, at::Device device) {
  constexpr size_t kMostMasks = 16;  // a layout has one image mask; more means masks made per step
  auto it = columns.masks.find(allowed.unsafeGetTensorImpl());
  if (it == columns.masks.end()) {
    if (columns.masks.size() >= kMostMasks) columns.masks.clear();
    const at::Tensor cut = allowed.to(at::kCPU).to(at::kBool).index_select(0, columns.host_ids);
    Columns::Mask mask{allowed, io::upload(cut.to(at::kByte).contiguous(), device), cut.any().item<bool>()};
    it = columns.masks.emplace(allowed.unsafeGetTensorImpl(), std::move(mask)).first;
  }
  return it->second;
}

}  // namespace

at::Tensor run_logits_pipeline_on_columns(const at::Tensor& logits, const std::vector<SlotConstraint>& constraints,
                                          const PipelineSettings& settings, const std::vector<int64_t>& columns) {
  if (!logits.is_cuda() || logits.dim() != 3 || columns.empty()) return {};
  const int64_t vocab = logits.size(2);
  const at::Device device = logits.device();
  // Slots forced to a token outside the columns (a window's slots past the image's end are forced
  // to token 0): a point mass whatever the logits, so they run as any column and are set after.
  std::vector<int64_t> outside_slots, outside_tokens;
  std::vector<int64_t> forced;
  std::vector<int32_t> mask_of_slot;
  std::vector<at::Tensor> masks;
  at::Tensor column_ids;
  {
    // The cache is looked at under the lock; the step's own upload goes after it.
    const std::lock_guard<std::mutex> guard(lock);
    Columns* cols = columns_for(columns, vocab, device);
    if (cols == nullptr) return {};
    std::map<const void*, int32_t> row_of_mask;
    for (const SlotConstraint& c : constraints) {
      int64_t column = -1;
      int32_t row = -1;
      if (c.forced >= 0) {
        if (c.forced >= vocab) return {};  // the whole-width path names it
        column = cols->column_of[static_cast<size_t>(c.forced)];
        if (column < 0) {
          outside_slots.push_back(static_cast<int64_t>(forced.size()));
          outside_tokens.push_back(c.forced);
          column = 0;
        }
      } else if (c.allowed.defined()) {
        if (c.allowed.numel() != vocab) return {};  // the whole-width path names the mismatch
        const auto known = row_of_mask.find(c.allowed.unsafeGetTensorImpl());
        if (known != row_of_mask.end()) {
          row = known->second;
        } else {
          const Columns::Mask& mask = compact_mask(*cols, c.allowed, device);
          if (!mask.any) return {};  // every token it allows has probability 0: the whole width decides
          row = static_cast<int32_t>(masks.size());
          row_of_mask.emplace(c.allowed.unsafeGetTensorImpl(), row);
          masks.push_back(mask.compact);
        }
      }
      forced.push_back(column);
      mask_of_slot.push_back(row);
    }
    column_ids = cols->on_device;
  }
  io::StepUpload up;  // the slots' forced columns and mask rows, and the outside slots, in one upload
  const size_t outside_slots_d = up.add(outside_slots);
  const size_t outside_tokens_d = up.add(outside_tokens);
  const DeviceConstraints cut = send_constraints(up, forced, mask_of_slot, masks, device);
  const at::Tensor probs = run_logits_pipeline(logits.index_select(2, column_ids), cut, settings);
  at::Tensor all = at::zeros({probs.size(0), vocab}, probs.options()).index_copy_(1, column_ids, probs);
  if (!outside_slots.empty()) {
    const at::Tensor slots = up.tensor(outside_slots_d, at::kLong);
    all.index_fill_(0, slots, 0.0f);
    all.index_put_({slots, up.tensor(outside_tokens_d, at::kLong)},
                   at::ones({static_cast<int64_t>(outside_slots.size())}, all.options()));
  }
  return all;
}

}  // namespace sjd::sampling::cuda

#endif  // SJD_WITH_CUDA
