#include "model/window_attention.h"

#include <cmath>
#include <stdexcept>

#ifdef SJD_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/attention_kernels.h"
#endif

namespace sjd::model {

#ifdef SJD_WITH_CUDA

namespace {

bool floating_kernel_type(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// The kernel loads 8 elements at a time: every row it reads starts 16-byte aligned.
bool aligned_rows(const at::Tensor& t) {
  if (t.stride(-1) != 1 || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) {
    if (t.size(d) > 1 && (t.stride(d) * t.element_size()) % 16 != 0) return false;
  }
  return true;
}

kernels::ElementType element_type(at::ScalarType t) {
  if (t == at::kBFloat16) return kernels::ElementType::kBFloat16;
  if (t == at::kHalf) return kernels::ElementType::kFloat16;
  return kernels::ElementType::kFloat32;
}

// The kernel's arguments for these tensors (checked by window_attention_takes).
kernels::WindowAttentionArgs args_of(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                                     const at::Tensor& bias) {
  kernels::WindowAttentionArgs a;
  a.type = element_type(q.scalar_type());
  a.q = q.data_ptr();
  a.q_row = q.stride(0), a.q_head = q.stride(1), a.q_slot = q.stride(2);
  a.keys = keys.data_ptr();
  a.values = values.data_ptr();
  a.kv_row = keys.stride(0), a.kv_head = keys.stride(1), a.kv_slot = keys.stride(2);
  a.bias = bias.data_ptr();
  a.bias_row = bias.stride(0), a.bias_slot = bias.stride(2);
  a.rows = static_cast<int>(q.size(0));
  a.heads = static_cast<int>(q.size(1));
  a.kv_heads = static_cast<int>(keys.size(1));
  a.width = static_cast<int>(q.size(2));
  a.dim = static_cast<int>(q.size(3));
  a.keys_count = keys.size(2);
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.dim)));
  return a;
}

}  // namespace

bool window_attention_takes(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& bias) {
  if (!q.is_cuda() || q.dim() != 4 || keys.dim() != 4 || bias.dim() != 4) return false;
  const at::ScalarType type = q.scalar_type();
  if (!floating_kernel_type(type) || keys.scalar_type() != type || values.scalar_type() != type ||
      bias.scalar_type() != type) {
    return false;
  }
  for (const at::Tensor* t : {&keys, &values, &bias}) {
    if (t->device() != q.device()) return false;
  }
  const int64_t rows = q.size(0), heads = q.size(1), width = q.size(2), dim = q.size(3), count = keys.size(2);
  if (rows > 65535 || heads > 65535 || width > 65535 || dim > 65535 || keys.size(1) > 65535 || count == 0) return false;
  if (keys.size(0) != rows || keys.size(3) != dim || !values.sizes().equals(keys.sizes()) ||
      !values.strides().equals(keys.strides()) || !bias.sizes().equals({rows, 1, width, count})) {
    return false;
  }
  return q.stride(-1) == 1 && aligned_rows(keys) && aligned_rows(values) && aligned_rows(bias) &&
         kernels::window_attention_takes_shape(args_of(q, keys, values, bias));
}

bool window_attention_on_tensor_cores(const at::Tensor& q, const at::Tensor& keys) {
  kernels::WindowAttentionArgs a;
  a.heads = static_cast<int>(q.size(1));
  a.kv_heads = static_cast<int>(keys.size(1));
  a.width = static_cast<int>(q.size(2));
  return kernels::window_attention_on_tensor_cores(a);
}

at::Tensor window_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& bias) {
  if (!window_attention_takes(q, keys, values, bias)) {
    throw std::invalid_argument("window_attention: shapes, types or layouts it does not take");
  }
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options());
  kernels::WindowAttentionArgs a = args_of(q, keys, values, bias);
  // The chunks' partials: rows x heads x W x chunks x (D + 2) floats, chunks of 256 keys on CUDA cores and 512
  // on tensor cores (Lumina at L = 64 over 2540 keys: 11 MB; 16 CFG pairs at W = 16 over 8192 keys: 270 MB).
  // The memory estimate counts a step's attention scores, which are larger (engine/memory_estimate.cpp).
  const at::Tensor scratch =
      at::empty({kernels::window_attention_scratch_floats(a)}, q.options().dtype(at::kFloat));
  a.scratch = scratch.data_ptr<float>();
  a.out = out.data_ptr();
  kernels::launch_window_attention(a, c10::cuda::getCurrentCUDAStream(q.device().index()).stream());
  return out.transpose(1, 2);
}

#else

bool window_attention_takes(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  return false;
}

bool window_attention_on_tensor_cores(const at::Tensor&, const at::Tensor&) { return false; }

at::Tensor window_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  throw std::invalid_argument("window_attention: this build of sjd has no CUDA");
}

#endif

}  // namespace sjd::model
