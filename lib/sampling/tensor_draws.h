#pragma once
// The draft book's draws from a distribution held as a tensor, wherever it
// lives: on the CPU the reference draws of categorical.h; on a CUDA device (the
// book of a decode verified there) the same draws on the same Philox streams.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "sampling/philox.h"

namespace sjd::sampling {

// sample_token over q (float32 [V]).
int64_t sample_from(const at::Tensor& q, const RngKey& key);

// sample_from(q, key) for every draw: the initial drafts of a step drawn from a stale p
// (sample-left/up). On a CUDA device one kernel and one read for all of them (every
// sequence of the batch), where sample_from reads each q back.
struct RowDraw {
  at::Tensor q;
  RngKey key;
};
std::vector<int64_t> sample_each(const std::vector<RowDraw>& draws);

// One distribution's candidates after `first`: up to `want` tokens drawn without
// replacement from q with `first` removed (draw_without_replacement on stream
// `key`, which must be a kCandidates key of sub-stream 0: the kernel draws on
// that stream); fewer when q has fewer tokens of positive mass.
struct CandidateDraw {
  at::Tensor q;
  int64_t first = 0;
  int want = 0;
  RngKey key;
};
// Every draw's candidates, each on its own stream. On a CUDA device one kernel and
// one read for all of them (a step's trees, every sequence of the batch).
std::vector<std::vector<int64_t>> draw_after(const std::vector<CandidateDraw>& draws);

}  // namespace sjd::sampling
