// The layer's fused kernels (model/fused_layer_ops.h) against the ATen ops they
// replace, on the same device tensors. They round where those ops round, so the
// stated tolerance is rounding-level: float32 within 1e-5 of the values' scale
// (only a norm's sums run in another order), bfloat16 and float16 within 3 units
// in the last place at that scale (one for the norm's sum order, carried through
// the affine step and RoPE's products and sum). A wrong RoPE partner, head, layout
// or cache slot is off by the values themselves. The residual sum is exact, and
// the cache is compared whole: written slots within the tolerance, every other
// slot unchanged. Then the transformer with and without them, step after step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_cases.h"
#include "model/fused_layer_ops.h"
#include "model/kv_cache.h"
#include "model/norms.h"
#include "model/rope.h"
#include "model/transformer.h"
#include "testing/test_support.h"
#include "tiny_transformer.h"

using namespace sjd;

namespace {

// Three units in the last place (the file's comment says why).
double tolerance(at::ScalarType dtype) { return cuda_testing::rounding_tolerance(dtype, 3); }

at::Tensor random_on(at::IntArrayRef shape, at::ScalarType dtype, at::Device device, double scale = 1.0) {
  return (at::randn(shape) * scale).to(device, dtype);
}

}  // namespace

TEST_CASE("fused add + RMS norm: the exact residual sum and at::rms_norm of it", "[cuda][fused]") {
  const at::Device device = cuda_testing::device();
  at::manual_seed(21);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    // Fewer elements than a warp holds; Lumina's 4096 (1024 threads, 4 each); a ragged last chunk; a row past
    // what the registers hold (8 x 1024 elements), whose tail is read twice.
    for (const int64_t hidden : {96, 4096, 4100, 20000}) {
      INFO(c10::toString(dtype) << ", hidden " << hidden);
      const at::Tensor x = random_on({3, 5, hidden}, dtype, device);
      const at::Tensor delta = random_on({3, 5, hidden}, dtype, device, 0.5);
      const at::Tensor weight = random_on({hidden}, dtype, device);
      const at::Tensor sum = x + delta;
      const auto [got_sum, got_normed] = model::fused_add_rms_norm(x, delta, weight, 1e-5);
      CHECK(at::equal(got_sum, sum));
      CHECK(cuda_testing::scaled_error(model::rms_norm_fused(sum, weight, 1e-5), got_normed) < tolerance(dtype));

      const auto [same, normed] = model::fused_add_rms_norm(x, at::Tensor(), weight, 1e-5);
      CHECK(same.data_ptr() == x.data_ptr());  // no delta: the input is the residual
      CHECK(cuda_testing::scaled_error(model::rms_norm_fused(x, weight, 1e-5), normed) < tolerance(dtype));
    }
  }
}

TEST_CASE("fused silu(gate) * up gives at::silu(gate) * up", "[cuda][fused]") {
  const at::Device device = cuda_testing::device();
  at::manual_seed(22);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const int64_t inner : {700, 11008}) {  // part of one block's run; Lumina's 11 runs, the last ragged
      INFO(c10::toString(dtype) << ", inner " << inner);
      const at::Tensor gate_up = random_on({4, 3, 2 * inner}, dtype, device, 3.0);
      const at::Tensor expected = at::silu(gate_up.narrow(-1, 0, inner)) * gate_up.narrow(-1, inner, inner);
      const at::Tensor got = model::fused_silu_mul(gate_up);
      CHECK(got.sizes() == expected.sizes());
      CHECK(cuda_testing::scaled_error(expected, got) < tolerance(dtype));
    }
  }
}

TEST_CASE("fused qkv prologue: qk-norm, RoPE, q in attention's layout and K/V in their cache slots", "[cuda][fused]") {
  const at::Device device = cuda_testing::device();
  at::manual_seed(23);
  const int64_t rows = 2, width = 3, capacity = 10, layer = 1;
  const std::vector<int64_t> cache_rows = {2, 0};  // not the identity: the slots name the cache row
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const bool qk_norm : {false, true}) {
      for (const bool two_d : {false, true}) {
        // MHA, GQA, and 3 + 2 x 1 heads: 30 (cell, head) pairs, so the last block's warps are not all used.
        for (const auto& [heads, kv_heads] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {4, 2}, {3, 1}}) {
          // Fewer elements than a warp has lanes; Lumina's and Emu3's size; 8 per lane.
          for (const int64_t dim : {16, 128, 256}) {
            INFO(c10::toString(dtype) << ", qk-norm " << qk_norm << ", 2D RoPE " << two_d << ", heads " << heads
                                      << ", kv heads " << kv_heads << ", head size " << dim);
            model::TransformerConfig c = testing::tiny_config(qk_norm, kv_heads);
            c.head_dim = dim;
            if (two_d) {
              c.rope = model::RopeKind::k2d;
              c.grid_width = 4;
            }
            const model::RopeTable table(c, 40, dtype, device);
            // Caption slots (-1) among image positions for 2D RoPE; plain positions for 1D.
            const at::Tensor positions =
                at::tensor(two_d ? std::vector<int64_t>{-1, 0, 1, 9, 10, 10} : std::vector<int64_t>{5, 6, 7, 2, 3, 3},
                           at::kLong).view({rows, width}).to(device);
            const model::RopeFactors rope = table.gather(positions);
            const at::Tensor qkv = random_on({rows, width, heads + 2 * kv_heads, dim}, dtype, device, 2.0);
            const at::Tensor norm_w = random_on({heads + kv_heads, dim}, dtype, device);
            const at::Tensor norm_b = random_on({heads + kv_heads, dim}, dtype, device, 0.2);

            // Two caches with the same contents and lengths (row 2: 4 slots, row 0: 1 slot).
            model::KvCache expected_cache(2, 3, kv_heads, capacity, dim, dtype, device);
            model::KvCache got_cache(2, 3, kv_heads, capacity, dim, dtype, device);
            for (int64_t l = 0; l < 2; ++l) {
              const at::Tensor k = random_on({3, kv_heads, capacity, dim}, dtype, device);
              const at::Tensor v = random_on({3, kv_heads, capacity, dim}, dtype, device);
              for (model::KvCache* cache : {&expected_cache, &got_cache}) {
                cache->key_buffer(l).copy_(k);
                cache->value_buffer(l).copy_(v);
              }
            }
            for (model::KvCache* cache : {&expected_cache, &got_cache}) {
              cache->commit_row(2, {0, 1, 2, 3}, {1, 1, 1, 1});
              cache->commit_row(0, {0}, {1});
            }
            const model::KvCache::StepSlots slots = got_cache.step_slots(cache_rows, width);
            const at::Tensor untouched_k = got_cache.key_buffer(0).clone();

            at::Tensor qk = qkv.narrow(2, 0, heads + kv_heads);
            if (qk_norm) qk = model::head_layer_norm_fused(qk, norm_w, norm_b, c.qk_norm_eps);
            qk = table.apply(qk, rope);
            const at::Tensor expected_q = qk.narrow(2, 0, heads).transpose(1, 2);
            expected_cache.write(layer, slots, qk.narrow(2, heads, kv_heads), qkv.narrow(2, heads + kv_heads, kv_heads));

            const model::QkvPrologue how{heads, kv_heads, qk_norm ? norm_w : at::Tensor(),
                                         qk_norm ? norm_b : at::Tensor(), c.qk_norm_eps, two_d};
            const at::Tensor q = model::fused_qkv_prologue(qkv, how, rope, got_cache, layer, slots);
            CHECK(q.sizes() == expected_q.sizes());
            CHECK(q.transpose(1, 2).is_contiguous());  // [rows, W, heads, D] memory: see fused_qkv_prologue
            CHECK(cuda_testing::scaled_error(expected_q, q) < tolerance(dtype));
            CHECK(cuda_testing::scaled_error(expected_cache.key_buffer(layer), got_cache.key_buffer(layer)) < tolerance(dtype));
            CHECK(at::equal(expected_cache.value_buffer(layer), got_cache.value_buffer(layer)));  // v: copied as is
            // Only the step's slots of the layer were written.
            const at::Tensor written = at::zeros({3, capacity}, at::kBool);
            for (size_t r = 0; r < cache_rows.size(); ++r) {
              written[cache_rows[r]].narrow(0, got_cache.length(cache_rows[r]), width).fill_(true);
            }
            const at::Tensor kept = (~written).view({3, 1, capacity, 1}).to(device);
            CHECK(at::equal(got_cache.key_buffer(layer).masked_select(kept),
                            expected_cache.key_buffer(layer).masked_select(kept)));
            CHECK(at::equal(got_cache.key_buffer(0), untouched_k));
          }
        }
      }
    }
  }
}

namespace {

// The tiny transformer in each form the fused kernels take: f32 and bf16, MHA and GQA, with and
// without qk-norm, 1D and LlamaGen's 2D RoPE (the prompt's caption slots at position -1).
struct FusedCase {
  at::ScalarType dtype;
  model::TransformerConfig config;
  model::RowPrompt prompt;
};

std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> cases;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t kv_heads : {4, 2}) {
      for (const bool qk_norm : {false, true}) {
        for (const bool two_d : {false, true}) {
          FusedCase c{dtype, testing::tiny_config(qk_norm, kv_heads), {}};
          if (two_d) {
            c.config.rope = model::RopeKind::k2d;
            c.config.grid_width = 4;
          }
          c.prompt.tokens = {1, 2, 3, 4, 5};
          c.prompt.positions = two_d ? std::vector<int64_t>{-1, -1, -1, 0, 1} : std::vector<int64_t>{0, 1, 2, 3, 4};
          c.prompt.key_valid = {1, 1, 1, 1, 1};
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

// Case c's model twice on the device, from the same weights, with PyTorch's attention: a fault of the
// window attention fails its own tags, not [fused] or [graphs] (device_check.sh turns off what a failing
// tag names).
std::pair<std::unique_ptr<model::Transformer>, std::unique_ptr<model::Transformer>> two_models(const FusedCase& c,
                                                                                               at::Device device) {
  const io::WeightMap w = testing::tiny_weights(c.config, 14);
  std::pair<std::unique_ptr<model::Transformer>, std::unique_ptr<model::Transformer>> models{
      std::make_unique<model::Transformer>(c.config, model::load_transformer_weights(w, c.config, c.dtype, device)),
      std::make_unique<model::Transformer>(c.config, model::load_transformer_weights(w, c.config, c.dtype, device))};
  models.first->use_window_attention(false);
  models.second->use_window_attention(false);
  return models;
}

// Four steps of the same windows (two nodes, then none, in turn) through both models; the
// candidate's logits within `tolerance` of the reference's at every step.
void check_steps_agree(model::Transformer& reference, model::Transformer& candidate, const FusedCase& c,
                       double tolerance) {
  for (model::Transformer* m : {&reference, &candidate}) m->start({c.prompt, c.prompt}, 24, 8);
  int64_t root = 5;
  for (int step = 0; step < 4; ++step) {
    model::DraftTree nodes;
    if (step % 2 == 0) {
      nodes.push(8, -1);
      nodes.push(9, 0);
    }
    const at::Tensor expected = reference.forward({root, root}, nodes);
    const at::Tensor got = candidate.forward({root, root}, nodes);
    INFO("step " << step);
    CHECK(cuda_testing::scaled_error(expected, got) < tolerance);
    const std::vector<int> path = nodes.size() > 0 ? std::vector<int>{0} : std::vector<int>{};
    for (model::Transformer* m : {&reference, &candidate}) m->commit(path);
    root = 11 + step;
  }
}

std::string describe(const FusedCase& c) {
  return std::string(c10::toString(c.dtype)) + ", kv heads " + std::to_string(c.config.num_kv_heads) +
         ", qk-norm " + std::to_string(c.config.qk_norm) + ", 2D RoPE " +
         std::to_string(c.config.rope == model::RopeKind::k2d);
}

}  // namespace

// Eager forwards on both sides, so a fault of the CUDA graphs cannot switch the fused kernels off
// (device_check.sh turns off what a failing tag names).
TEST_CASE("the transformer with the fused layer kernels gives the ATen ops' logits, step after step", "[cuda][fused]") {
  const at::Device device = cuda_testing::device();
  for (const FusedCase& c : fused_cases()) {
    INFO(describe(c));
    const auto models = two_models(c, device);
    model::Transformer& aten_ops = *models.first;
    model::Transformer& fused = *models.second;
    aten_ops.use_fused_layer_ops(false);
    fused.use_fused_layer_ops(true);
    for (model::Transformer* m : {&aten_ops, &fused}) m->use_step_graphs(false);
    CHECK(fused.fused_layer_ops());
    CHECK_FALSE(aten_ops.fused_layer_ops());
    check_steps_agree(aten_ops, fused, c, c.dtype == at::kFloat ? 1e-5 : 0.05);
    CHECK(fused.captured_step_graphs() == 0);
  }
}

// The fused kernels captured and replayed against the same kernels run eagerly: a fault of the
// fused kernels themselves shows on both sides alike, so this case fails only for the graphs.
TEST_CASE("the fused layer kernels replayed from CUDA graphs give their eager logits", "[cuda][graphs]") {
  // device_check.sh reruns [graphs] after [fused]: kernels already found wrong (and switched off)
  // must not switch the graphs off too.
  const char* fused_switch = std::getenv("SJD_FUSED_LAYER_OPS");
  if (fused_switch != nullptr && std::string(fused_switch) == "0") {
    SJD_SKIP_TEST("SJD_FUSED_LAYER_OPS=0: the fused kernels are off, nothing to replay");
  }
  const at::Device device = cuda_testing::device();
  for (const FusedCase& c : fused_cases()) {
    INFO(describe(c));
    const auto models = two_models(c, device);
    model::Transformer& eager = *models.first;
    model::Transformer& graphed = *models.second;
    for (model::Transformer* m : {&eager, &graphed}) m->use_fused_layer_ops(true);
    eager.use_step_graphs(false);
    graphed.use_step_graphs(true);
    check_steps_agree(eager, graphed, c, c.dtype == at::kFloat ? 1e-5 : 0.05);
    // A capture that failed would have fallen back to eager forwards unseen.
    CHECK(graphed.step_graphs_failure().empty());
    CHECK(graphed.captured_step_graphs() == 2);
  }
}
