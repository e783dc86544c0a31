#pragma once
// What a window's verification on a device committed, as the host reads it:
// the window walk kernel's packed int64 verdict (its layout: kernels/kernels.h,
// WalkArgs) unpacked. Plain host code, built with or without CUDA, so the CPU
// tests hold the unpacking to the layout the kernel writes.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace sjd::sampling::cuda {

// A window's verdict as the device verifier reads it back (decoding::WindowVerifier's
// WindowOutcome on the CPU): what it committed, and what it hands to the draft book.
struct WindowResult {
  std::vector<int64_t> tokens;       // committed
  std::vector<int> path;             // accepted nodes
  bool rejected = false;
  int sibling_accepts = 0;
  std::vector<int64_t> next_drafts;  // for positions first + tokens.size() on
};

// `packed`: a window of `chain` spine drafts' verdict, int64 [kernels::walk_packed_size(chain)]
// on the CPU. Counts that do not fit the layout (a kernel fault) are refused, never read past it.
WindowResult unpack_window(const at::Tensor& packed, int chain);

}  // namespace sjd::sampling::cuda
