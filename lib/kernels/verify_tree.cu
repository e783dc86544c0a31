// SJD-PAC's tree levels on the device.
//  - verify_tree_kernel: recursive rejection sampling of one level's K
//    candidates (drawn without replacement from q) against one slot's p; one
//    block per (slot, level) pair, candidates in order. Candidate k is tested
//    against the running residual target p^(k) with q^(k) = q without the
//    earlier candidates, renormalised. Where p and q have mass on few ids (a
//    top-k row: Lumina-mGPT's 2000 of 65536), the block lists them in shared
//    memory and every pass reads the list; otherwise each pass reads the whole
//    vocabulary in global memory.
//  - draw_candidates_kernel: the candidates themselves, by Gumbel-top-k.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "kernels/block_ops.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.cuh"

namespace sjd::kernels {
namespace {

constexpr int kThreads = 256;
// A tree block's passes over the vocabulary wait on memory, not arithmetic (an H200 trace: 932 us for
// 21 blocks of 256 threads at Lumina's 65536 ids): more threads per block make each thread's chain of
// loads shorter, and every loop below issues its loads before its stores.
constexpr int kTreeThreads = 512;
// Most ids a block lists: two top-2048 rows (Emu3's) that share no id fit. 12 bytes each: 96 KB.
constexpr int kMaxListed = 8192;
constexpr int kListedBytesPerId = static_cast<int>(sizeof(int32_t) + 2 * sizeof(float));

// One (slot, level) pair's inputs.
struct TreeBlock {
  const float* p;
  const float* q;
  const int64_t* candidates;
  int count;
  int64_t position;
  double weight;
};

__device__ TreeBlock tree_block(const TreeArgs& a) {
  const int i = blockIdx.x;
  const int depth = a.depth[i];
  return {a.probs + static_cast<int64_t>(a.slot[i]) * a.vocab,
          a.level_q[depth],
          a.candidates + static_cast<int64_t>(depth) * a.max_candidates,
          a.candidate_count[depth],
          a.step.first_position + depth,
          a.relax.weights != nullptr ? a.relax.weights[depth] : 1.0};
}

// The block's state between the passes, in shared memory.
struct LevelState {
  double q_remaining;  // q's mass left after the candidates tried, summed from the row
  bool accepted;
  bool exhausted;      // q has no further candidate
  int draft_at;        // the listed path: the candidate's place in the list, -1 if not listed
  DraftNeighbourhood own;
};

__device__ PhiloxStream level_key(const TreeArgs& a, const TreeBlock& b, uint32_t purpose, int k) {
  return PhiloxStream{a.step.seed, a.step.sequence, a.step.step, static_cast<uint32_t>(b.position), purpose,
                      static_cast<uint32_t>(k)};
}

// `listed`: how many ids the block verified over, -1 for the whole vocabulary.
__device__ void write_verdict(const TreeArgs& a, int candidate, int64_t token, int listed) {
  if (threadIdx.x == 0) {
    a.accepted_candidate[blockIdx.x] = candidate;
    a.token[blockIdx.x] = token;
    if (a.listed != nullptr) a.listed[blockIdx.x] = listed;
  }
}

// Starts a level from every thread's share of q's mass. q's mass, and below what it has left after each
// candidate, is summed from the row: a float row sums to 1 only within ~1e-6, an error that 1 minus the tried
// candidates' q would divide by the little mass left (sampling::verify_candidates).
__device__ void start_level(LevelState& s, double local_q) {
  const double q_mass = block_sum(local_q);
  if (threadIdx.x == 0) {
    s.q_remaining = q_mass;
    s.own.count = 0;
  }
  __syncthreads();
}

// After a rejected candidate's residual: q without it (`candidate_q`, its entry, null if it has none) for the
// next one. Returns whether q has a further candidate.
__device__ bool next_candidate(LevelState& s, double rest, float* candidate_q) {
  __syncthreads();
  if (threadIdx.x == 0) {
    s.q_remaining = rest;
    if (candidate_q != nullptr) *candidate_q = 0.0f;
    s.exhausted = !(rest > 0.0);
  }
  __syncthreads();
  return !s.exhausted;
}

// The whole vocabulary, in the block's three rows of `scratch`.
__device__ void verify_dense(const TreeArgs& a, const TreeBlock& b, LevelState& s) {
  const int64_t n = a.vocab;
  float* __restrict__ target = a.scratch + static_cast<int64_t>(blockIdx.x) * 3 * n;  // p^(k)
  float* __restrict__ draft_q = target + n;  // q with earlier candidates removed
  float* __restrict__ residual = draft_q + n;

  double local_q = 0.0;
#pragma unroll 4
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    const float pv = b.p[v], qv = b.q[v];
    target[v] = pv;
    draft_q[v] = qv;
    local_q += qv;
  }
  start_level(s, local_q);

  for (int k = 0; k < b.count; ++k) {
    const int64_t c = b.candidates[k];
    if (threadIdx.x == 0) {
      const float qk_c = static_cast<float>(draft_q[c] / s.q_remaining);
      s.accepted = accept_draft(relaxed_score(a.relax, target, c, b.weight), qk_c,
                                philox_uniform(level_key(a, b, kPurposeAccept, k), 0));
      s.own.draft = c;
      if (!s.accepted && a.relax.kind == kRelaxLantern && a.relax.lantern_own_residual) {
        s.own.count = lantern_extras(a.relax, target, c, s.own.extra, &s.own.mass);
      }
    }
    __syncthreads();
    if (s.accepted) {
      write_verdict(a, k, c, -1);
      return;
    }
    const double remaining = s.q_remaining;
    double local_mass = 0.0, local_rest = 0.0;
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
      const float dq = draft_q[v];
      // 0 / remaining is +0 exactly (remaining > 0): the double division only where q has mass.
      const float qk = dq == 0.0f ? 0.0f : static_cast<float>(dq / remaining);
      const float r = residual_weight(a.relax, target, qk, v, b.weight, s.own);
      residual[v] = r;
      local_mass += r;
      if (v != c) local_rest += dq;
    }
    const double rest = block_sum(local_rest);
    const double mass = block_sum(local_mass);  // also orders the residual writes before the rewrite below
    if (mass > 0.0) {
      const double scale = 1.0 / mass;
#pragma unroll 4
      for (int64_t v = threadIdx.x; v < n; v += blockDim.x) target[v] = static_cast<float>(residual[v] * scale);
    }
    if (!next_candidate(s, rest, draft_q + c)) break;
  }
  // Every candidate failed: draw from the last residual target (or p, if it has no mass).
  const PhiloxStream key = level_key(a, b, kPurposeResidual, b.count);
  int64_t token = block_race([&](int64_t v) { return target[v]; }, n, key);
  if (token < 0) token = block_race([&](int64_t v) { return b.p[v]; }, n, key);
  write_verdict(a, -1, token, -1);
}

// The ids where p or q has mass, increasing, with the running target and q of each.
struct ListedRow {
  int32_t* ids;
  float* target;
  float* draft_q;
};

__device__ ListedRow listed_row(unsigned char* memory, int capacity) {
  int32_t* ids = reinterpret_cast<int32_t*>(memory);
  float* target = reinterpret_cast<float*>(ids + capacity);
  return {ids, target, target + capacity};
}

// Lists the row's ids with mass: warp w takes the w-th slice of the vocabulary and lists its ids in order, so
// the list increases and is the same on every run (no atomics). Returns how many, the same in every thread, or
// -1 when they are more than `capacity` (nothing is listed then).
__device__ int list_support(const TreeBlock& b, int64_t n, int capacity, const ListedRow& row) {
  __shared__ int warp_first[kMaxWarps + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t slice = (n + warps * 32 - 1) / (warps * 32) * 32;
  const int64_t begin = warp * slice, end = begin + slice < n ? begin + slice : n;
  int count = 0;
#pragma unroll 8
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t v = base + lane;
    count += __popc(__ballot_sync(0xFFFFFFFFu, v < end && (b.p[v] > 0.0f || b.q[v] > 0.0f)));
  }
  if (lane == 0) warp_first[warp + 1] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    warp_first[0] = 0;
    for (int w = 1; w <= warps; ++w) warp_first[w] += warp_first[w - 1];
  }
  __syncthreads();
  const int listed = warp_first[warps];
  if (listed > capacity) return -1;
  int at = warp_first[warp];
  const unsigned below = (1u << lane) - 1u;
#pragma unroll 4
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t v = base + lane;
    const float pv = v < end ? b.p[v] : 0.0f, qv = v < end ? b.q[v] : 0.0f;
    const bool has_mass = pv > 0.0f || qv > 0.0f;
    const unsigned mask = __ballot_sync(0xFFFFFFFFu, has_mass);
    if (has_mass) {
      const int j = at + __popc(mask & below);
      row.ids[j] = static_cast<int32_t>(v);
      row.target[j] = pv;
      row.draft_q[j] = qv;
    }
    at += __popc(mask);
  }
  __syncthreads();
  return listed;
}

// The list's place of `token`, or -1 (one thread: a binary search over the increasing ids).
__device__ int find_listed(const int32_t* ids, int m, int64_t token) {
  int low = 0, high = m;
  while (low < high) {
    const int mid = (low + high) / 2;
    if (ids[mid] < token) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low < m && ids[low] == token ? low : -1;
}

// Listed id j's residual weight. `target` points at its entry: without LANTERN, residual_weight and relaxed_score
// read the token's own p only.
__device__ float listed_residual(const TreeArgs& a, const float* target, float dq, double remaining, double weight,
                                 const DraftNeighbourhood& own) {
  const float qk = dq == 0.0f ? 0.0f : static_cast<float>(dq / remaining);
  return residual_weight(a.relax, target, qk, 0, weight, own);
}

// verify_dense's passes over the m listed ids. An id not listed has p = q = 0 at every pass: its residual weight
// is 0 under every relaxation but LANTERN's, so leaving it out changes no sum, no target and no race.
__device__ void verify_listed(const TreeArgs& a, const TreeBlock& b, const ListedRow& row, int m, LevelState& s) {
  double local_q = 0.0;
  for (int j = threadIdx.x; j < m; j += blockDim.x) local_q += row.draft_q[j];
  start_level(s, local_q);

  for (int k = 0; k < b.count; ++k) {
    const int64_t c = b.candidates[k];
    if (threadIdx.x == 0) {
      const int at = find_listed(row.ids, m, c);
      // An id not listed has q^(k) = 0: accept_draft rejects it before it reads the score.
      const float qk_c = at < 0 ? 0.0f : static_cast<float>(row.draft_q[at] / s.q_remaining);
      const double score = at < 0 ? 0.0 : relaxed_score(a.relax, row.target + at, 0, b.weight);
      s.accepted = accept_draft(score, qk_c, philox_uniform(level_key(a, b, kPurposeAccept, k), 0));
      s.draft_at = at;
    }
    __syncthreads();
    if (s.accepted) {
      write_verdict(a, k, c, m);
      return;
    }
    const double remaining = s.q_remaining;
    const int at = s.draft_at;
    double local_mass = 0.0, local_rest = 0.0;
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
      const float dq = row.draft_q[j];
      local_mass += listed_residual(a, row.target + j, dq, remaining, b.weight, s.own);
      if (j != at) local_rest += dq;
    }
    const double rest = block_sum(local_rest);
    const double mass = block_sum(local_mass);
    if (mass > 0.0) {
      // Each thread rewrites the entries it read above, so the weights are computed again, not stored.
      const double scale = 1.0 / mass;
      for (int j = threadIdx.x; j < m; j += blockDim.x) {
        const float r = listed_residual(a, row.target + j, row.draft_q[j], remaining, b.weight, s.own);
        row.target[j] = static_cast<float>(r * scale);
      }
    }
    if (!next_candidate(s, rest, at >= 0 ? row.draft_q + at : nullptr)) break;
  }
  const PhiloxStream key = level_key(a, b, kPurposeResidual, b.count);
  int64_t token = block_race_listed(row.ids, m, [&](int j) { return row.target[j]; }, key);
  if (token < 0) token = block_race_listed(row.ids, m, [&](int j) { return b.p[row.ids[j]]; }, key);
  write_verdict(a, -1, token, m);
}

__global__ void __launch_bounds__(kTreeThreads, 2) verify_tree_kernel(TreeArgs a, int listed_capacity) {
  extern __shared__ __align__(16) unsigned char listed_memory[];
  __shared__ LevelState state;
  const TreeBlock b = tree_block(a);
  if (listed_capacity > 0) {  // never for LANTERN (launch_verify_tree)
    const ListedRow row = listed_row(listed_memory, listed_capacity);
    const int m = list_support(b, a.vocab, listed_capacity, row);
    if (m >= 0) {
      verify_listed(a, b, row, m, state);
      return;
    }
  }
  verify_dense(a, b, state);
}

__global__ void draw_candidates_kernel(CandidateArgs a) {
  const int i = blockIdx.x;
  const float* q = a.q[i];
  const int64_t exclude = a.exclude[i];
  const StepInfo& step = a.steps[i];
  const PhiloxStream key{step.seed, step.sequence, step.step, static_cast<uint32_t>(a.position[i]), kPurposeCandidates,
                         0u};
  __shared__ int64_t chosen[kMaxCandidates];
  int64_t* out = a.out + static_cast<int64_t>(i) * a.want;
  for (int r = 0; r < a.want; ++r) {
    // The next of the Gumbel-top-k order: the best q/E among tokens not yet taken.
    const int64_t next = block_race(
        [&](int64_t v) {
          if (v == exclude) return 0.0f;
          for (int j = 0; j < r; ++j) {
            if (chosen[j] == v) return 0.0f;
          }
          return q[v];
        },
        a.vocab, key);
    if (threadIdx.x == 0) {
      chosen[r] = next;
      out[r] = next;
    }
    __syncthreads();
    if (next < 0) {  // no positive mass left: pad
      for (int j = r + 1 + static_cast<int>(threadIdx.x); j < a.want; j += blockDim.x) out[j] = -1;
      return;
    }
  }
}

// How many ids a block may list on the current device: the shared memory a block may opt into, less the
// kernel's own; asked once per device.
int listed_capacity() {
  static std::mutex asking;
  static std::map<int, int> by_device;
  int device = 0;
  cudaGetDevice(&device);
  const std::lock_guard<std::mutex> lock(asking);
  if (const auto known = by_device.find(device); known != by_device.end()) return known->second;
  int opt_in = 0;
  cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  cudaFuncAttributes own{};
  cudaFuncGetAttributes(&own, verify_tree_kernel);
  const int spare = opt_in - static_cast<int>(own.sharedSizeBytes);
  return by_device[device] = std::clamp(spare / kListedBytesPerId, 0, kMaxListed);
}

}  // namespace

void launch_verify_tree(const TreeArgs& args, StreamHandle stream) {
  if (args.count <= 0) return;
  // LANTERN's levels never list (its scores read neighbours' p): they do not reserve the 96 KB, which would
  // halve the blocks an SM holds.
  const int capacity = args.list_support && args.relax.kind != kRelaxLantern ? listed_capacity() : 0;
  const int bytes = capacity * kListedBytesPerId;
  if (bytes > 0) allow_dynamic_shared_memory(reinterpret_cast<const void*>(&verify_tree_kernel), bytes, "verify_tree");
  verify_tree_kernel<<<args.count, kTreeThreads, bytes, static_cast<cudaStream_t>(stream)>>>(args, capacity);
  check_launch("verify_tree_kernel");
}

void launch_draw_candidates(const CandidateArgs& args, StreamHandle stream) {
  if (args.count <= 0 || args.want <= 0) return;
  if (args.want > kMaxCandidates) throw std::runtime_error("draw_candidates: more than 16 candidates per position");
  draw_candidates_kernel<<<args.count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("draw_candidates_kernel");
}

}  // namespace sjd::kernels
