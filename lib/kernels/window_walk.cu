// The verification walk on the device: from the parallel verdicts of the spine
// (verify.cu) and of the tree levels (verify_tree.cu), follow the window the
// way decoding::WindowVerifier::verify does -- accepted nodes root to leaf,
// the first rejection's residual token or the bonus, then the next drafts --
// and pack the step's outcome so the host reads it with one small copy.
#include <cuda_runtime.h>

#include "kernels/kernels.h"
#include "kernels/launch_check.cuh"

namespace sjd::kernels {
namespace {

// One thread: the walk is at most `chain` cheap steps.
__global__ void window_walk_kernel(WalkArgs a) {
  int64_t* header = a.packed;
  int64_t* tokens = a.packed + walk_tokens_offset(a.chain);
  int64_t* path = a.packed + walk_path_offset(a.chain);
  int64_t* next = a.packed + walk_next_offset(a.chain);
  const int64_t first = a.step.first_position, total = a.step.total_length;
  int n = 0, m = 0, siblings = 0, slot = 0, k = 0;
  bool on_spine = true, rejected = false;
  int64_t final_token = -1;
  for (; k < a.chain; ++k) {
    int node = k;
    bool accepted;
    int64_t token;
    if (k < a.levels && (a.level_size[k] > 1 || !on_spine)) {  // a tree level: the recursive verdict of this slot
      const int t = a.tree_index_of_slot[slot];
      const int candidate = a.tree_candidate[t];
      accepted = candidate >= 0;
      token = a.tree_token[t];
      if (accepted) {
        node = a.child_of[slot * a.max_candidates + candidate];
        siblings += candidate > 0 ? 1 : 0;
      }
    } else {
      if (!on_spine) break;  // past the tree only the spine continues as a chain
      accepted = a.accepted[k] != 0;
      token = a.mrs_token[k];
    }
    if (!accepted) {
      final_token = token;
      rejected = true;
      break;
    }
    path[m++] = node;
    tokens[n++] = a.node_token[node];
    slot = node + 1;
    on_spine = on_spine && node == k;
  }
  if (final_token < 0 && first + k < total) final_token = a.sample_token[slot];  // everything passed: bonus
  if (final_token >= 0) tokens[n++] = final_token;
  int d = 0;
  for (int s = n; s <= a.chain && first + s < total; ++s) next[d++] = a.tail_token[s];
  header[0] = n;
  header[1] = m;
  header[2] = rejected ? 1 : 0;
  header[3] = siblings;
  header[4] = d;
}

}  // namespace

void launch_window_walk(const WalkArgs& args, StreamHandle stream) {
  window_walk_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("window_walk_kernel");
}

}  // namespace sjd::kernels
