#pragma once
// Window forwards replayed from CUDA graphs (on by default; SJD_CUDA_GRAPHS=0 turns them off):
// one graph per step shape (first cache row, rows, window width). A step's
// inputs -- tokens, positions, the attention bias over the cache's whole
// capacity, the KV write indices -- are copied into the shape's static device
// tensors, and the graph captured from the first forward of that shape replays
// every layer's kernels in one launch. What a graph reads must not move: the
// transformer drops its graphs when the KV cache, the RoPE table or the output
// head is rebuilt. The CUDA types stay in the .cpp; a build without CUDA has the
// class and refuses to run it.
#include <ATen/ATen.h>

#include <c10/core/Stream.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace sjd::model {

class StepGraphs {
 public:
  // Shapes captured at most. The graphs share one memory pool for their work; what each keeps
  // is its static inputs and output, which grow with the rows (Lumina 7B at L = 64: about 5 MB
  // for one CFG pair, 16 times that for 16 pairs, so up to 2 GB for 24 such shapes), and each
  // costs a capture (an eager run and the capture, tens of ms for a 7B model) the first time its
  // shape is met.
  static constexpr size_t kMaxShapes = 24;
  // The width a window of `width` slots (the root and width - 1 drafted nodes) is padded to for a
  // graph: the nodes rounded up to the next of 0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, ...
  // (about 1.5x apart; the fixed windows L = 16, 32, 64 stay as they are). Automatic windows
  // change their width from step to step; padded, every width up to L = 64 falls on 13 shapes
  // and SJD-PAC's automatic trees (up to 145 nodes) on 16, where each width of its own would
  // soon use up kMaxShapes and send every later new width to the eager forward. The padding
  // costs compute (up to 1.5x the window's tokens), which a GPU does not notice while a step is
  // bound by its weight reads, but a large batch's step may (not measured yet).
  static int64_t padded_width(int64_t width);

  struct Shape {
    int64_t first_row = 0, rows = 0, width = 0;
    bool operator<(const Shape& o) const {
      return std::tie(first_row, rows, width) < std::tie(o.first_row, o.rows, o.width);
    }
  };
  // A step's inputs on the device: tokens and positions int64 [rows, width], the bias
  // [rows, 1, width, capacity], the KV write's (row, slot) indices int64 [rows * width].
  struct Inputs {
    at::Tensor tokens, positions, bias, slot_rows, slot_slots;
  };
  using Forward = std::function<at::Tensor(const Inputs&)>;
  // A capture that failed (an op that cannot be captured, memory): the caller may go on
  // eagerly. Errors of the eager warm-up run and of replays are not this; they propagate.
  struct CaptureFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  StepGraphs();
  ~StepGraphs();
  StepGraphs(StepGraphs&&) noexcept;
  StepGraphs& operator=(StepGraphs&&) noexcept;

  bool has(const Shape& shape) const { return entries_.count(shape) > 0; }
  // Whether `shape` has a graph or room for one.
  bool takes(const Shape& shape) const { return entries_.count(shape) > 0 || entries_.size() < kMaxShapes; }
  // Logits of `forward` on `inputs`: captured from this call for a new shape, replayed for a known one.
  // The result is the caller's own tensor (the graph's output is copied).
  at::Tensor run(const Shape& shape, const Inputs& inputs, const Forward& forward);
  size_t captured() const { return entries_.size(); }
  // The bytes the captured shapes' static inputs and outputs take (not their shared pool, whose
  // blocks the allocator counts as held but unused between replays).
  int64_t static_bytes() const;
  void clear();

 private:
  struct Entry;
  // Captures the new entry `it`'s graph from `forward`; a failure forgets the entry.
  void capture(std::map<Shape, std::unique_ptr<Entry>>::iterator it, const Forward& forward);
  std::map<Shape, std::unique_ptr<Entry>> entries_;
  std::pair<unsigned long long, unsigned long long> pool_{0, 0};  // the graphs' shared memory pool (a MempoolId_t)
  // Every warm-up and capture runs on this one stream: PyTorch's allocator reuses a free block only
  // on the stream that freed it, so captures on streams of their own would each keep a step's
  // temporaries in the pool (and cuBLAS a workspace per stream) instead of sharing them.
  std::optional<c10::Stream> capture_stream_;
};

}  // namespace sjd::model
