// The VQ decoders' group norm and convolution give the same floats on any
// intra-op thread count, on inputs where ATen's own ops do not (the broken
// variant each test rejects: should a Torch upgrade make ATen's op agree with
// itself, pick an input where it does not), and stay within float rounding of
// ATen's result.
// The whole decode is checked end to end in tests/engine/test_batch_robustness.cpp.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include <functional>
#include <vector>

#include "vq/thread_invariant_ops.h"

using namespace sjd::vq;

namespace {

// The op's output at 1, 2 and 3 intra-op threads (the test process runs on one, and gets it back).
std::vector<at::Tensor> at_thread_counts(const std::function<at::Tensor()>& op) {
  struct Restore {
    int threads;
    ~Restore() { at::set_num_threads(threads); }
  } restore{at::get_num_threads()};
  std::vector<at::Tensor> outputs;
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    outputs.push_back(op());
  }
  return outputs;
}

bool all_equal(const std::vector<at::Tensor>& outputs) {
  for (const at::Tensor& out : outputs) {
    if (!at::equal(out, outputs.front())) return false;
  }
  return true;
}

float max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<float>(); }

}  // namespace

TEST_CASE("group norm: the same floats at 1, 2 and 3 threads, where ATen's differ", "[vq][threads]") {
  at::manual_seed(3);
  // Channels-last, as oneDNN's convolutions hand it over at the default model's 64x64 level.
  const at::Tensor x = (at::randn({1, 64, 64, 64}) * 3.0 + 5.0).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor weight = at::randn({64}), bias = at::randn({64});
  const auto ours = at_thread_counts([&] { return group_norm(x, 32, weight, bias, 1e-6); });
  const auto aten = at_thread_counts([&] { return at::group_norm(x, 32, weight, bias, 1e-6); });
  CHECK(all_equal(ours));
  CHECK_FALSE(all_equal(aten));  // the input tells the two apart
  CHECK(max_difference(ours[0], aten[0]) < 1e-4f);
}

TEST_CASE("convolution: a 1x1 kernel gives the same floats at 1, 2 and 3 threads, where ATen's differ",
          "[vq][threads]") {
  at::manual_seed(5);
  const at::Tensor x = at::randn({1, 128, 16, 16});
  const at::Tensor weight = at::randn({128, 128, 1, 1}) * 0.1, bias = at::randn({128});
  const auto ours = at_thread_counts([&] { return convolution(x, weight, bias, {0, 0}); });
  const auto aten = at_thread_counts([&] { return at::conv2d(x, weight, bias); });
  CHECK(all_equal(ours));
  CHECK_FALSE(all_equal(aten));  // one thread takes ATen's matrix-product path, more take oneDNN
  CHECK(max_difference(ours[0], aten[0]) < 1e-4f);
}

TEST_CASE("convolution: 3x3 with padding and the 3-D kernels match ATen at every thread count", "[vq][threads]") {
  at::manual_seed(6);
  const at::Tensor x2 = at::randn({1, 16, 9, 11});
  const at::Tensor w2 = at::randn({8, 16, 3, 3}) * 0.1, b2 = at::randn({8});
  const auto ours2 = at_thread_counts([&] { return convolution(x2, w2, b2, {1, 1}); });
  CHECK(all_equal(ours2));
  CHECK(ours2[0].sizes() == at::IntArrayRef{1, 8, 9, 11});
  CHECK(max_difference(ours2[0], at::conv2d(x2, w2, b2, 1, 1)) < 1e-4f);
  // MoVQ's temporal convolutions: 3x1x1 and 3x3x3 kernels over [N, C, T, H, W].
  const at::Tensor x3 = at::randn({1, 8, 4, 6, 6});
  for (const auto& shape : {std::vector<int64_t>{8, 8, 3, 1, 1}, std::vector<int64_t>{8, 8, 3, 3, 3}}) {
    const at::Tensor w3 = at::randn(shape) * 0.1, b3 = at::randn({8});
    const auto ours3 = at_thread_counts([&] { return convolution(x3, w3, b3, {0, 0, 0}); });
    CHECK(all_equal(ours3));
    CHECK(max_difference(ours3[0], at::conv3d(x3, w3, b3)) < 1e-4f);
  }
}

TEST_CASE("batched matmul: the same floats at 1, 2 and 3 threads, and near at::bmm's", "[vq][threads]") {
  at::manual_seed(7);
  // The attention's probabilities times values at 32x32 positions, one image: a long sum over positions.
  const at::Tensor probs = at::softmax(at::randn({1, 1024, 1024}), -1), values = at::randn({1, 1024, 128});
  const auto ours = at_thread_counts([&] { return batched_matmul(probs, values); });
  const auto aten = at_thread_counts([&] { return at::bmm(probs, values); });
  CHECK(all_equal(ours));
  // Why ours exists: on the Intel CPUs we measured, MKL sums a long K in another order on one thread. Not
  // every CPU's MKL path does (an AMD EPYC's gives the same floats); ours must be invariant either way.
  if (all_equal(aten)) WARN("at::bmm gave the same floats at 1, 2 and 3 threads on this CPU");
  CHECK(ours[0].sizes() == at::IntArrayRef{1, 1024, 128});
  CHECK(max_difference(ours[0], aten[0]) < 1e-5f);
  // The scores' shape (K = channels), two images, with a transposed right-hand side as the attention passes it.
  const at::Tensor query = at::randn({2, 300, 64}), key = at::randn({2, 300, 64});
  CHECK(max_difference(batched_matmul(query, key.transpose(1, 2)), at::bmm(query, key.transpose(1, 2))) < 1e-4f);
}
