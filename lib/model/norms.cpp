#include "model/norms.h"

namespace sjd::model {

at::Tensor rms_norm_explicit(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // Computed in float32 whatever the weights' dtype (LlamaGen and bf16 need it).
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * weight.to(at::kFloat)).to(x.scalar_type());
}

at::Tensor rms_norm_fused(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return at::rms_norm(x, {x.size(-1)}, weight, eps);
}

at::Tensor head_layer_norm_explicit(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor xf = x.to(at::kFloat);  // [..., heads, D]
  const at::Tensor centred = xf - xf.mean(-1, true);
  const at::Tensor var = centred.pow(2).mean(-1, true);
  return (centred * at::rsqrt(var + eps) * w.to(at::kFloat) + b.to(at::kFloat)).to(x.scalar_type());
}

at::Tensor head_layer_norm_fused(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::addcmul(b, at::layer_norm(x, {x.size(-1)}, {}, {}, eps), w);
}

}  // namespace sjd::model
