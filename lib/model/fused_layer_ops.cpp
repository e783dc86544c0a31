#include "model/fused_layer_ops.h"

#include <stdexcept>
#include <string>
#include <vector>

#ifdef SJD_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/layer_kernels.h"
#endif

namespace sjd::model {

#ifdef SJD_WITH_CUDA

namespace {

kernels::ElementType element_type(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return kernels::ElementType::kFloat32;
    case at::kBFloat16: return kernels::ElementType::kBFloat16;
    case at::kHalf: return kernels::ElementType::kFloat16;
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": no kernel for " + c10::toString(t.scalar_type()));
}

// Every tensor the kernel reads by raw pointer: on the device of `first`, of its dtype, contiguous.
void require_like(const at::Tensor& first, const at::Tensor& t, const char* op, const char* name) {
  if (!t.is_cuda() || t.device() != first.device() || t.scalar_type() != first.scalar_type() || !t.is_contiguous()) {
    throw std::invalid_argument(std::string(op) + ": " + name + " must be a contiguous " +
                                c10::toString(first.scalar_type()) + " tensor on " + first.device().str());
  }
}

kernels::StreamHandle stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

}  // namespace

bool fused_layer_ops_built() { return true; }

std::pair<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& delta,
                                                     const at::Tensor& weight, double eps) {
  const char* op = "fused_add_rms_norm";
  require_like(x, x, op, "x");
  if (delta.defined()) require_like(x, delta, op, "delta");
  require_like(x, weight, op, "weight");
  const int64_t hidden = x.size(-1);
  if ((delta.defined() && !delta.sizes().equals(x.sizes())) || weight.numel() != hidden) {
    throw std::invalid_argument(std::string(op) + ": shapes do not match x's");
  }
  const c10::cuda::CUDAGuard guard(x.device());
  kernels::AddRmsNormArgs a;
  a.type = element_type(x, op);
  a.x = x.data_ptr();
  a.delta = delta.defined() ? delta.data_ptr() : nullptr;
  a.weight = weight.data_ptr();
  a.tokens = x.numel() / hidden;
  a.hidden = hidden;
  a.eps = static_cast<float>(eps);
  // Without delta the residual is x itself, returned as it is: callers must not write it in place.
  at::Tensor sum = delta.defined() ? at::empty_like(x) : x;
  at::Tensor normed = at::empty_like(x);
  a.sum = delta.defined() ? sum.data_ptr() : nullptr;
  a.normed = normed.data_ptr();
  kernels::launch_add_rms_norm(a, stream_of(x));
  return {sum, normed};
}

at::Tensor fused_silu_mul(const at::Tensor& gate_up) {
  const char* op = "fused_silu_mul";
  require_like(gate_up, gate_up, op, "gate_up");
  if (gate_up.size(-1) % 2 != 0) throw std::invalid_argument(std::string(op) + ": gate_up's last size is odd");
  const c10::cuda::CUDAGuard guard(gate_up.device());
  std::vector<int64_t> sizes(gate_up.sizes().begin(), gate_up.sizes().end());
  sizes.back() /= 2;
  at::Tensor out = at::empty(sizes, gate_up.options());
  kernels::SiluMulArgs a;
  a.type = element_type(gate_up, op);
  a.gate_up = gate_up.data_ptr();
  a.inner = sizes.back();
  a.tokens = a.inner > 0 ? out.numel() / a.inner : 0;
  a.out = out.data_ptr();
  kernels::launch_silu_mul(a, stream_of(gate_up));
  return out;
}

at::Tensor fused_qkv_prologue(const at::Tensor& qkv, const QkvPrologue& how, const RopeFactors& rope,
                              KvCache& cache, int64_t layer, const KvCache::StepSlots& slots) {
  const char* op = "fused_qkv_prologue";
  require_like(qkv, qkv, op, "qkv");
  if (qkv.dim() != 4 || qkv.size(2) != how.heads + 2 * how.kv_heads) {
    throw std::invalid_argument(std::string(op) + ": qkv must be [rows, W, heads + 2 kv_heads, D]");
  }
  const int64_t rows = qkv.size(0), width = qkv.size(1), dim = qkv.size(3);
  const at::Tensor cos = rope.cos.contiguous(), sin = rope.signed_sin.contiguous();
  require_like(qkv, cos, op, "RoPE cos");
  require_like(qkv, sin, op, "RoPE signed sin");
  if (layer < 0 || layer >= cache.layers()) {
    throw std::out_of_range(std::string(op) + ": no cache layer " + std::to_string(layer));
  }
  at::Tensor& keys = cache.key_buffer(layer);
  at::Tensor& values = cache.value_buffer(layer);
  require_like(qkv, keys, op, "the K cache");
  require_like(qkv, values, op, "the V cache");
  if (cos.numel() != rows * width * dim || keys.size(1) != how.kv_heads || keys.size(3) != dim ||
      !values.sizes().equals(keys.sizes())) {
    throw std::invalid_argument(std::string(op) + ": RoPE factors or cache do not match qkv");
  }
  // The slots are read by the kernel through raw pointers: a host tensor there would be a bad address.
  for (const at::Tensor* t : {&slots.rows, &slots.slots}) {
    if (t->device() != qkv.device() || t->scalar_type() != at::kLong || t->numel() != rows * width) {
      throw std::invalid_argument(std::string(op) + ": the step's slots must be int64 [" +
                                  std::to_string(rows * width) + "] on " + qkv.device().str());
    }
  }
  if (how.norm_weight.defined()) {
    require_like(qkv, how.norm_weight, op, "qk-norm weight");
    require_like(qkv, how.norm_bias, op, "qk-norm bias");
    const int64_t norm_size = (how.heads + how.kv_heads) * dim;
    if (how.norm_weight.numel() != norm_size || how.norm_bias.numel() != norm_size) {
      throw std::invalid_argument(std::string(op) + ": qk-norm weight and bias must be [heads + kv_heads, D]");
    }
  }
  const c10::cuda::CUDAGuard guard(qkv.device());
  at::Tensor q = at::empty({rows, width, how.heads, dim}, qkv.options());
  const at::Tensor slot_rows = slots.rows.contiguous(), slot_index = slots.slots.contiguous();
  kernels::QkvPrologueArgs a;
  a.type = element_type(qkv, op);
  a.qkv = qkv.data_ptr();
  a.rows = static_cast<int>(rows);
  a.width = static_cast<int>(width);
  a.heads = static_cast<int>(how.heads);
  a.kv_heads = static_cast<int>(how.kv_heads);
  a.dim = static_cast<int>(dim);
  a.norm_weight = how.norm_weight.defined() ? how.norm_weight.data_ptr() : nullptr;
  a.norm_bias = how.norm_weight.defined() ? how.norm_bias.data_ptr() : nullptr;
  a.norm_eps = static_cast<float>(how.norm_eps);
  a.cos = cos.data_ptr();
  a.signed_sin = sin.data_ptr();
  a.rope_2d = how.rope_2d;
  a.q_out = q.data_ptr();
  a.k_cache = keys.data_ptr();
  a.v_cache = values.data_ptr();
  a.capacity = keys.size(2);
  a.slot_row = slot_rows.data_ptr<int64_t>();
  a.slot_index = slot_index.data_ptr<int64_t>();
  kernels::launch_qkv_prologue(a, stream_of(qkv));
  return q.transpose(1, 2);
}

#else

bool fused_layer_ops_built() { return false; }

namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw std::invalid_argument(std::string(op) + ": this build of sjd has no CUDA");
}
}  // namespace

std::pair<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  no_cuda("fused_add_rms_norm");
}
at::Tensor fused_silu_mul(const at::Tensor&) { no_cuda("fused_silu_mul"); }
at::Tensor fused_qkv_prologue(const at::Tensor&, const QkvPrologue&, const RopeFactors&, KvCache&, int64_t,
                              const KvCache::StepSlots&) {
  no_cuda("fused_qkv_prologue");
}

#endif

}  // namespace sjd::model
