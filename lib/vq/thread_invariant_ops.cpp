#include "vq/thread_invariant_ops.h"

#include <vector>

namespace sjd::vq {

at::Tensor group_norm(const at::Tensor& x, int64_t groups, const at::Tensor& weight, const at::Tensor& bias,
                      double eps) {
  return at::group_norm(x.contiguous(), groups, weight, bias, eps);
}

at::Tensor convolution(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::IntArrayRef padding) {
  const std::vector<int64_t> ones(padding.size(), 1);
  if (x.is_cpu() && at::hasMKLDNN()) {
    return at::mkldnn_convolution(x.contiguous(), weight, bias, padding, /*stride=*/ones, /*dilation=*/ones,
                                  /*groups=*/1);
  }
  return at::convolution(x, weight, bias, /*stride=*/ones, padding, /*dilation=*/ones, /*transposed=*/false,
                         /*output_padding=*/std::vector<int64_t>(padding.size(), 0), /*groups=*/1);
}

}  // namespace sjd::vq
