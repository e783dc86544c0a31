// The small-window attention kernel (model/window_attention.h) against the attention
// it replaces, computed here in float64 on the device from the same inputs:
// softmax(q k^T / sqrt(D) + bias) v. The inputs are laid out as a step lays them
// out: q a transposed view of [rows, W, heads, D], K/V views of a larger cache
// (a first row past 0, a capacity past the keys), a bias with 16-aligned rows
// that blocks each row's keys past its own length, a few invalid keys among the
// committed ones, and a chain or tree mask over the window. Every cache slot a
// query may not see holds NaN: one read of a blocked key or value shows as NaN
// in the output. Tolerance: float32 within 1e-5 of the output's scale (the sums
// run in another order), bfloat16 / float16 within 2 units in the last place of
// the output's scale (the output's own rounding, plus the inputs' rounding
// carried through the softmax's sums; a wrong key, chunk or head is off by the
// values themselves). Then the transformer with it against PyTorch's attention.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "device_cases.h"
#include "model/transformer.h"
#include "model/window_attention.h"
#include "tiny_transformer.h"

using namespace sjd;

namespace {

double tolerance(at::ScalarType dtype) { return cuda_testing::rounding_tolerance(dtype, 2); }

struct Step {
  at::Tensor q, keys, values, bias;  // as the transformer hands them to attention
  at::Tensor expected;               // float64 [rows, heads, W, D]
};

// rows x heads queries over `count` keys of a cache with room for `capacity`; lengths[r] committed keys
// per row (every 7th of them invalid), then the window: a chain, or a tree where slot w sees slot w - 2.
Step make_step(at::ScalarType dtype, at::Device device, int64_t heads, int64_t kv_heads, int64_t width,
               int64_t dim, const std::vector<int64_t>& lengths, bool tree, uint64_t seed) {
  at::manual_seed(static_cast<int64_t>(seed));
  const int64_t rows = static_cast<int64_t>(lengths.size()), first_row = 1, capacity = 768, count = 704;
  const at::Tensor k_cache = at::randn({rows + 2, kv_heads, capacity, dim}).to(device, dtype);
  const at::Tensor v_cache = at::randn({rows + 2, kv_heads, capacity, dim}).to(device, dtype);
  // The bias [rows, 1, W, count] in a buffer of 16-aligned rows (count is, the buffer's stride too).
  const double blocked = -std::numeric_limits<double>::infinity();
  at::Tensor bias = at::full({rows, 1, width, count}, blocked, at::kDouble);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t length = lengths[static_cast<size_t>(r)];
    for (int64_t j = 0; j < length; ++j) {
      if (j % 7 != 3) bias[r][0].select(1, j).fill_(0.0);  // an invalid committed key: blocked for every query
    }
    for (int64_t w = 0; w < width; ++w) {
      for (int64_t j = 0; j <= w; ++j) {
        if (!tree || j == w || j == w - 2 || j == 0) bias[r][0][w][length + j] = 0.0;
      }
    }
  }
  const at::Tensor open = (bias > -1.0).any(2).squeeze(1);  // [rows, count]: keys some query sees
  // What no query sees becomes NaN in the cache the kernel reads; the reference reads the clean copy.
  const at::Tensor dirty_k = k_cache.clone(), dirty_v = v_cache.clone();
  const at::Tensor unseen = (~open).to(device).view({rows, 1, count, 1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  dirty_k.narrow(0, first_row, rows).narrow(2, 0, count).masked_fill_(unseen, nan);
  dirty_v.narrow(0, first_row, rows).narrow(2, 0, count).masked_fill_(unseen, nan);
  dirty_k.narrow(0, first_row, rows).narrow(2, count, capacity - count).fill_(nan);
  dirty_v.narrow(0, first_row, rows).narrow(2, count, capacity - count).fill_(nan);

  Step s;
  s.q = at::randn({rows, width, heads, dim}).to(device, dtype).transpose(1, 2);
  s.keys = dirty_k.narrow(0, first_row, rows).narrow(2, 0, count);
  s.values = dirty_v.narrow(0, first_row, rows).narrow(2, 0, count);
  s.bias = bias.to(device, dtype);
  const int64_t group = heads / kv_heads;
  const auto clean = [&](const at::Tensor& cache) {
    return cache.narrow(0, first_row, rows).narrow(2, 0, count).to(at::kDouble).repeat_interleave(group, 1);
  };
  const at::Tensor k = clean(k_cache), v = clean(v_cache);
  const at::Tensor scores =
      at::matmul(s.q.to(at::kDouble), k.transpose(2, 3)) / std::sqrt(static_cast<double>(dim)) + bias.to(device);
  s.expected = at::matmul(at::softmax(scores, -1), v);
  return s;
}

using Shape = std::tuple<int64_t, int64_t, int64_t>;  // heads, kv heads, W

// Every (dtype, shape, head size) as a chain and as a tree against the float64 reference, on the cores
// `tensor_cores` names; seeds from `seed` on.
void check_attention_cases(const std::vector<at::ScalarType>& dtypes, const std::vector<Shape>& shapes,
                           const std::vector<int64_t>& dims, const std::vector<int64_t>& lengths, bool tensor_cores,
                           uint64_t seed) {
  const at::Device device = cuda_testing::device();
  for (const at::ScalarType dtype : dtypes) {
    for (const auto& [heads, kv_heads, width] : shapes) {
      for (const int64_t dim : dims) {
        for (const bool tree : {false, true}) {
          INFO(c10::toString(dtype) << ", heads " << heads << ", kv heads " << kv_heads << ", W " << width << ", D "
                                    << dim << (tree ? ", tree" : ", chain"));
          const Step s = make_step(dtype, device, heads, kv_heads, width, dim, lengths, tree, ++seed);
          REQUIRE(model::window_attention_takes(s.q, s.keys, s.values, s.bias));
          CHECK(model::window_attention_on_tensor_cores(s.q, s.keys) == tensor_cores);
          const at::Tensor got = model::window_attention(s.q, s.keys, s.values, s.bias);
          CHECK(got.sizes() == s.expected.sizes());
          CHECK(got.transpose(1, 2).is_contiguous());  // [rows, W, heads, D] memory
          CHECK_FALSE(got.isnan().any().item<bool>());
          // On tensor cores P is rounded to the element type before its product with V, as flash attention
          // does (a CPU emulation of that kernel on these inputs: at most 0.47 units).
          CHECK(cuda_testing::scaled_error(s.expected, got) < tolerance(dtype));
        }
      }
    }
  }
}

}  // namespace

// CUDA cores: at most 16 query vectors per K/V head, any floating type, head sizes from 8 (16, 2 and 1
// keys per warp at once). Shapes: an AR step; MHA at the widest window it takes; GQA 4:1 at its widest;
// GQA 2:1 at an odd width. Lengths: a row whose later chunks are all blocked (read nothing), one ending
// inside the last chunk, one crossing a chunk's edge (256).
TEST_CASE("window attention gives softmax(q k^T / sqrt(D) + bias) v and reads no blocked key",
          "[cuda][window-attention]") {
  check_attention_cases({at::kFloat, at::kBFloat16, at::kHalf}, {{4, 4, 1}, {4, 4, 16}, {8, 2, 4}, {6, 3, 5}},
                        {8, 64, 128}, {5, 650, 250}, false, 40);
}

// Tensor cores: more query vectors per K/V head, bfloat16 and float16, head sizes from 16. Shapes: one past
// the CUDA cores' 16; an L = 64 chain (a second block of one slot); GQA 4:1 at W = 20; SJD-PAC's padded tree
// width (4 blocks of slots, the last in part). 704 keys: a span of 512 and one of 192; lengths: a row whose
// second span and most 64-key passes are blocked, one ending past the first span, one crossing a pass's edge.
TEST_CASE("window attention on tensor cores gives the same attention for wide windows and trees",
          "[cuda][wide-attention]") {
  check_attention_cases({at::kBFloat16, at::kHalf}, {{4, 4, 17}, {4, 4, 65}, {8, 2, 20}, {2, 2, 193}}, {16, 64, 128},
                        {5, 505, 250}, true, 80);
}

TEST_CASE("window attention refuses what it does not take", "[cuda][window-attention]") {
  const at::Device device = cuda_testing::device();
  const Step s = make_step(at::kBFloat16, device, 4, 4, 4, 64, {5, 40}, false, 7);
  REQUIRE(model::window_attention_takes(s.q, s.keys, s.values, s.bias));
  CHECK_FALSE(model::window_attention_on_tensor_cores(s.q, s.keys));
  // 4 heads per K/V head x 5 slots go to tensor cores, which take no float32 and no head size 8.
  const Step wide = make_step(at::kFloat, device, 8, 2, 5, 64, {5, 40}, false, 8);
  CHECK_FALSE(model::window_attention_takes(wide.q, wide.keys, wide.values, wide.bias));
  const Step narrow_heads = make_step(at::kBFloat16, device, 8, 2, 5, 8, {5, 40}, false, 10);
  CHECK_FALSE(model::window_attention_takes(narrow_heads.q, narrow_heads.keys, narrow_heads.values, narrow_heads.bias));
  const Step wide_bf16 = make_step(at::kBFloat16, device, 8, 2, 5, 64, {5, 40}, false, 11);
  CHECK(model::window_attention_takes(wide_bf16.q, wide_bf16.keys, wide_bf16.values, wide_bf16.bias));
  // Head sizes that are not a power of two up to 128, another dtype, a bias whose rows are not 16-byte aligned.
  for (const int64_t dim : {48, 256}) {
    const Step odd = make_step(at::kBFloat16, device, 4, 4, 4, dim, {5, 40}, false, 9);
    CHECK_FALSE(model::window_attention_takes(odd.q, odd.keys, odd.values, odd.bias));
  }
  CHECK_FALSE(model::window_attention_takes(s.q, s.keys, s.values, s.bias.to(at::kFloat)));
  const at::Tensor shifted = at::zeros({2, 1, 4, 705}, s.bias.options()).narrow(3, 1, 704).copy_(s.bias);
  CHECK_FALSE(model::window_attention_takes(s.q, s.keys, s.values, shifted));
  CHECK_FALSE(model::window_attention_takes(s.q.cpu(), s.keys.cpu(), s.values.cpu(), s.bias.cpu()));
  CHECK_THROWS_WITH(model::window_attention(wide.q, wide.keys, wide.values, wide.bias),
                    Catch::Contains("does not take"));
}

namespace {

// The tiny model's steps through the window attention and through PyTorch's, eagerly and from graphs
// (whose bias spans the whole capacity). `wide`: head size 16, 20-node chains and a 20-node tree (tensor
// cores, bfloat16); otherwise AR and two-node windows (CUDA cores).
void check_transformer_steps(at::ScalarType dtype, bool wide) {
  const at::Device device = cuda_testing::device();
  for (const int64_t kv_heads : {4, 2}) {
    for (const bool graphs : {false, true}) {
      INFO(c10::toString(dtype) << (wide ? ", wide windows" : "") << ", kv heads " << kv_heads << ", graphs "
                                << graphs);
      model::TransformerConfig config = testing::tiny_config(true, kv_heads);
      if (wide) {
        config.head_dim = 16;
        config.hidden_size = 64;
      }
      const io::WeightMap w = testing::tiny_weights(config, 15);
      model::Transformer sdpa(config, model::load_transformer_weights(w, config, dtype, device));
      model::Transformer window(config, model::load_transformer_weights(w, config, dtype, device));
      sdpa.use_window_attention(false);
      window.use_window_attention(true);
      window.use_wide_window_attention(true);
      CHECK(window.wide_window_attention());
      model::RowPrompt prompt;
      prompt.tokens = {1, 2, 3, 4, 5};
      prompt.positions = {0, 1, 2, 3, 4};
      prompt.key_valid = {1, 0, 1, 1, 1};  // a masked prompt key
      for (model::Transformer* m : {&sdpa, &window}) {
        m->use_step_graphs(graphs);
        // Capacity past 256 keys: CUDA cores' second chunk is blocked throughout (tensor cores' passes
        // of 64 keys past the rows' lengths too).
        m->start({prompt, prompt}, 300, 24);
      }
      int64_t root = 5;
      for (int step = 0; step < 4; ++step) {
        model::DraftTree nodes;
        if (wide) {  // a chain of 20, or a tree of 20: two children per node
          for (int n = 0; n < 20; ++n) nodes.push(6 + n, step % 2 == 0 || n == 0 ? n - 1 : (n - 1) / 2);
        } else if (step % 2 == 0) {
          nodes.push(8, -1);
          nodes.push(9, 0);
        }
        const at::Tensor expected = sdpa.forward({root, root}, nodes);
        const at::Tensor got = window.forward({root, root}, nodes);
        INFO("step " << step);
        CHECK(cuda_testing::scaled_error(expected, got) < (dtype == at::kFloat ? 1e-5 : 0.05));
        const bool on_tensor_cores = window.attention_backend().find("tensor cores") != std::string::npos;
        CHECK(window.attention_backend().find("sjd window attention") == 0);
        CHECK(on_tensor_cores == wide);
        const std::vector<int> path = nodes.size() > 0 ? std::vector<int>{0} : std::vector<int>{};
        for (model::Transformer* m : {&sdpa, &window}) m->commit(path);
        root = 11 + step;
      }
      if (graphs) CHECK(window.step_graphs_failure().empty());
    }
  }
}

}  // namespace

TEST_CASE("the transformer with the window attention gives PyTorch attention's logits", "[cuda][window-attention]") {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) check_transformer_steps(dtype, false);
}

TEST_CASE("the transformer's wide windows on tensor cores give PyTorch attention's logits", "[cuda][wide-attention]") {
  check_transformer_steps(at::kBFloat16, true);
}

// SJD_WIDE_WINDOW_ATTENTION=0's switch: wide windows to PyTorch, small ones still to the CUDA cores.
TEST_CASE("the tensor-core switch leaves the CUDA-core kernel on", "[cuda][window-attention]") {
  const at::Device device = cuda_testing::device();
  model::TransformerConfig config = testing::tiny_config(true, 4);
  config.head_dim = 16;
  config.hidden_size = 64;
  model::Transformer m(config, model::load_transformer_weights(testing::tiny_weights(config, 16), config,
                                                               at::kBFloat16, device));
  m.use_window_attention(true);
  m.use_wide_window_attention(false);
  CHECK(m.window_attention());
  CHECK_FALSE(m.wide_window_attention());
  model::RowPrompt prompt;
  prompt.tokens = {1, 2, 3};
  prompt.positions = {0, 1, 2};
  prompt.key_valid = {1, 1, 1};
  m.start({prompt}, 40, 24);
  model::DraftTree chain;
  for (int n = 0; n < 20; ++n) chain.push(6 + n, n - 1);
  m.forward({3}, chain);
  CHECK(m.attention_backend().find("sjd window attention") == std::string::npos);
  m.commit({});
  m.forward({4}, model::DraftTree{});
  CHECK(m.attention_backend().find("sjd window attention on CUDA cores") == 0);
}
