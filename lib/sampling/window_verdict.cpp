#include "sampling/window_verdict.h"

#include <stdexcept>
#include <string>

#include "kernels/kernels.h"

namespace sjd::sampling::cuda {

WindowResult unpack_window(const at::Tensor& packed, int chain) {
  const int64_t size = kernels::walk_packed_size(chain);
  if (!packed.is_cpu() || packed.scalar_type() != at::kLong || packed.numel() != size) {
    throw std::invalid_argument("window verdict: expected int64 [" + std::to_string(size) +
                                "] on the CPU for a chain of " + std::to_string(chain));
  }
  const at::Tensor flat = packed.contiguous();
  const int64_t* h = flat.data_ptr<int64_t>();
  // Room the layout gives each list: tokens and next drafts chain + 1, the path chain.
  const auto check = [&](const char* what, int64_t count, int64_t room) {
    if (count < 0 || count > room) {
      throw std::runtime_error(std::string("window verdict: ") + what + " count " + std::to_string(count) +
                               " outside 0.." + std::to_string(room));
    }
  };
  check("token", h[0], chain + 1);
  check("path", h[1], chain);
  check("next draft", h[4], chain + 1);
  const int64_t* tokens = h + kernels::walk_tokens_offset(chain);
  const int64_t* path = h + kernels::walk_path_offset(chain);
  const int64_t* next = h + kernels::walk_next_offset(chain);
  WindowResult out;
  out.tokens.assign(tokens, tokens + h[0]);
  for (int64_t i = 0; i < h[1]; ++i) out.path.push_back(static_cast<int>(path[i]));
  out.rejected = h[2] != 0;
  out.sibling_accepts = static_cast<int>(h[3]);
  out.next_drafts.assign(next, next + h[4]);
  return out;
}

}  // namespace sjd::sampling::cuda
