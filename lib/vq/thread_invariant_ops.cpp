#include "vq/thread_invariant_ops.h"

#include <vector>

namespace sjd::vq {

at::Tensor group_norm(const at::Tensor& x, int64_t groups, const at::Tensor& weight, const at::Tensor& bias,
                      double eps) {
  return at::group_norm(x.contiguous(), groups, weight, bias, eps);
}

at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!a.is_cpu() || !at::hasMKLDNN()) return at::bmm(a, b);
  const int64_t m = a.size(1), k = a.size(2), n = b.size(2);
  std::vector<at::Tensor> products;
  for (int64_t i = 0; i < a.size(0); ++i) {
    // Input [1, K, M, 1] (a_i transposed: K channels, M pixels), filters [N, K, 1, 1] (b_i transposed).
    const at::Tensor input = a[i].t().contiguous().view({1, k, m, 1});
    const at::Tensor filters = b[i].t().contiguous().view({n, k, 1, 1});
    const at::Tensor out = at::mkldnn_convolution(input, filters, std::nullopt, /*padding=*/{0, 0}, /*stride=*/{1, 1},
                                                  /*dilation=*/{1, 1}, /*groups=*/1);
    products.push_back(out.reshape({n, m}).t());
  }
  return at::stack(products);
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
