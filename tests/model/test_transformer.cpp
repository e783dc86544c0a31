// The transformer's window forward, KV cache and position encodings.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "model/fused_layer_ops.h"
#include "model/rope.h"
#include "model/transformer.h"
#include "tiny_transformer.h"

using namespace sjd::model;

using sjd::testing::tiny_config;
using sjd::testing::tiny_weights;

namespace {

// ... through the same loader as real checkpoints.
Transformer tiny_transformer(const TransformerConfig& c, uint64_t seed) {
  return Transformer(c, load_transformer_weights(tiny_weights(c, seed), c, at::kFloat));
}

// The oracle for the fused, batched, cached forward: one row, no cache, every
// projection on its own from the checkpoint tensors, the textbook formulas.
at::Tensor reference_logits(const sjd::io::WeightMap& w, const TransformerConfig& c, const std::vector<int64_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const auto rms = [&](const at::Tensor& x, const at::Tensor& g) {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + c.norm_eps) * g;
  };
  const auto lin = [&](const at::Tensor& x, const std::string& name) { return at::matmul(x, w.get(name).t()); };
  const auto rope = [&](const at::Tensor& x) {  // x [n, heads, D], positions 0..n-1, rotate-half
    const int64_t d = c.head_dim;
    const at::Tensor inv = at::pow(c.rope_theta, -at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
    const at::Tensor ang = at::arange(0, n, at::kDouble).unsqueeze(1) * inv.unsqueeze(0);
    const at::Tensor cos = at::cat({ang.cos(), ang.cos()}, -1).unsqueeze(1).to(at::kFloat);
    const at::Tensor sin = at::cat({ang.sin(), ang.sin()}, -1).unsqueeze(1).to(at::kFloat);
    const at::Tensor rotated = at::cat({-x.narrow(-1, d / 2, d / 2), x.narrow(-1, 0, d / 2)}, -1);
    return x * cos + rotated * sin;
  };
  at::Tensor x = at::embedding(w.get("model.embed_tokens.weight"), at::tensor(tokens));
  const at::Tensor causal = at::ones({n, n}, at::kBool).tril();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor h = rms(x, w.get(p + "input_layernorm.weight"));
    at::Tensor q = lin(h, p + "self_attn.q_proj.weight").view({n, c.num_heads, c.head_dim});
    at::Tensor k = lin(h, p + "self_attn.k_proj.weight").view({n, c.num_kv_heads, c.head_dim});
    at::Tensor v = lin(h, p + "self_attn.v_proj.weight").view({n, c.num_kv_heads, c.head_dim});
    if (c.qk_norm) {
      const auto ln = [&](const at::Tensor& t, const std::string& name) {
        const at::Tensor mean = t.mean(-1, true);
        const at::Tensor var = (t - mean).pow(2).mean(-1, true);
        return (t - mean) * at::rsqrt(var + c.qk_norm_eps) * w.get(name + ".weight") + w.get(name + ".bias");
      };
      q = ln(q, p + "self_attn.q_norm");
      k = ln(k, p + "self_attn.k_norm");
    }
    q = rope(q).transpose(0, 1);
    k = rope(k).transpose(0, 1).repeat_interleave(c.num_heads / c.num_kv_heads, 0);
    v = v.transpose(0, 1).repeat_interleave(c.num_heads / c.num_kv_heads, 0);
    const at::Tensor scores = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(c.head_dim));
    const at::Tensor att = at::matmul(at::softmax(scores.masked_fill(causal.logical_not(), -INFINITY), -1), v);
    x = x + lin(att.transpose(0, 1).reshape({n, -1}), p + "self_attn.o_proj.weight");
    const at::Tensor m = rms(x, w.get(p + "post_attention_layernorm.weight"));
    x = x + lin(at::silu(lin(m, p + "mlp.gate_proj.weight")) * lin(m, p + "mlp.up_proj.weight"),
                p + "mlp.down_proj.weight");
  }
  return lin(rms(x, w.get("model.norm.weight")), "lm_head.weight");
}

RowPrompt prompt_of(std::vector<int64_t> tokens, int64_t first_position = 0) {
  RowPrompt r;
  r.tokens = std::move(tokens);
  for (size_t i = 0; i < r.tokens.size(); ++i) r.positions.push_back(first_position + static_cast<int64_t>(i));
  r.key_valid.assign(r.tokens.size(), 1);
  return r;
}

DraftTree chain(const std::vector<int64_t>& tokens) {
  DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i) t.push(tokens[i], static_cast<int>(i) - 1);
  return t;
}

}  // namespace

TEST_CASE("a window over k tokens equals k single-token steps", "[model]") {
  for (bool qk_norm : {false, true}) {
    Transformer model = tiny_transformer(tiny_config(qk_norm), 1);
    const std::vector<RowPrompt> rows = {prompt_of({1, 2, 3}), prompt_of({4, 5})};
    const std::vector<int64_t> drafts = {7, 8, 9, 10};

    model.start(rows, 16, 8);
    const at::Tensor window = model.forward({3, 5}, chain(drafts));  // [2, 5, V]

    model.start(rows, 16, 8);
    std::vector<int64_t> roots = {3, 5};
    for (size_t k = 0; k <= drafts.size(); ++k) {
      const at::Tensor single = model.forward(roots, DraftTree{});
      INFO("qk_norm " << qk_norm << " slot " << k);
      CHECK(at::allclose(single.select(1, 0), window.select(1, static_cast<int64_t>(k)), 1e-4, 1e-4));
      if (k == drafts.size()) break;
      model.commit({});
      roots = {drafts[k], drafts[k]};
    }
  }
}

TEST_CASE("tree windows equal their root-to-node chains, commit compacts the accepted path", "[model]") {
  Transformer model = tiny_transformer(tiny_config(true, 4), 2);
  const std::vector<RowPrompt> rows = {prompt_of({1, 2})};
  // Spine 10 -> 11, and a sibling 12 of 10 with child 13.
  DraftTree tree;
  tree.push(10, -1);
  tree.push(11, 0);
  tree.push(12, -1);
  tree.push(13, 2);
  model.start(rows, 16, 8);
  const at::Tensor t = model.forward({2}, tree);
  model.start(rows, 16, 8);
  const at::Tensor sibling_chain = model.forward({2}, chain({12, 13}));
  CHECK(at::allclose(t.select(1, 3), sibling_chain.select(1, 1), 1e-4, 1e-4));
  CHECK(at::allclose(t.select(1, 4), sibling_chain.select(1, 2), 1e-4, 1e-4));

  // Keep the off-spine path (nodes 2, 3): the next step must equal a fresh run over 1 2 12 13.
  model.start(rows, 16, 8);
  model.forward({2}, tree);
  model.commit({2, 3});
  const at::Tensor after = model.forward({20}, DraftTree{});
  model.start({prompt_of({1, 2, 12, 13, 20})}, 16, 8);
  const at::Tensor fresh = model.forward({20}, DraftTree{});
  CHECK(at::allclose(after, fresh, 1e-4, 1e-4));
}

TEST_CASE("one commit of two rows keeping different paths equals each row run alone", "[model]") {
  Transformer model = tiny_transformer(tiny_config(true, 4), 2);
  DraftTree tree;  // row 0: spine 10 -> 11, and a sibling 12 of 10 with child 13
  tree.push(10, -1);
  tree.push(11, 0);
  tree.push(12, -1);
  tree.push(13, 2);
  const DraftTree row1_chain = chain({30, 31});
  const DraftTree none;
  model.start({prompt_of({1, 2}), prompt_of({5, 6, 7})}, 16, 8);
  model.forward_rows({{0, 2, &tree}, {1, 7, &row1_chain}});
  const std::vector<int> off_spine = {2, 3}, first_node = {0};
  model.commit_rows({{0, &off_spine}, {1, &first_node}});  // row 0 moves two slots, row 1 none
  const at::Tensor after = model.forward_rows({{0, 20, &none}, {1, 21, &none}});

  model.start({prompt_of({1, 2, 12, 13, 20})}, 16, 8);
  const at::Tensor row0_alone = model.forward({20}, DraftTree{});
  model.start({prompt_of({5, 6, 7, 30, 21})}, 16, 8);
  const at::Tensor row1_alone = model.forward({21}, DraftTree{});
  CHECK(at::allclose(after[0], row0_alone[0], 1e-4, 1e-4));
  CHECK(at::allclose(after[1], row1_alone[0], 1e-4, 1e-4));
  CHECK_FALSE(at::allclose(after[0], after[1], 1e-4, 1e-4));  // the rows' contexts differ
}

TEST_CASE("rollback then re-forward equals a fresh run", "[model]") {
  Transformer model = tiny_transformer(tiny_config(false), 3);
  model.start({prompt_of({1, 2, 3})}, 16, 8);
  model.forward({3}, chain({4, 5}));
  model.commit({0, 1});  // cache: 1 2 3 4 5
  model.rollback(3);  // back to 1 2 with root 3 (fed again)
  const at::Tensor again = model.forward({3}, chain({6}));
  model.start({prompt_of({1, 2, 3})}, 16, 8);
  const at::Tensor fresh = model.forward({3}, chain({6}));
  CHECK(at::allclose(again, fresh, 1e-5, 1e-5));
}

TEST_CASE("rollback to the first root restores its key validity and a rollback into the prompt throws", "[model]") {
  // Lumina's unconditional row ends in a masked placeholder: the drafts after it must not see it, after a
  // rollback to it as on the first forward.
  Transformer model = tiny_transformer(tiny_config(false), 3);
  RowPrompt masked_root = prompt_of({1, 2, 3});
  masked_root.key_valid = {1, 1, 0};
  model.start({masked_root}, 16, 8);
  const at::Tensor fresh = model.forward({3}, chain({6, 7}));
  model.commit({0, 1});  // cache: 1 2 3 6 7
  model.rollback(3);     // back to 1 2 with root 3, masked again
  const at::Tensor again = model.forward({3}, chain({6, 7}));
  CHECK(at::allclose(again, fresh, 1e-5, 1e-5));
  model.commit({0});  // cache: 1 2 3 6
  CHECK_THROWS_WITH(model.rollback(3), Catch::Contains("reaches into row 0's prompt"));
}

TEST_CASE("masked prompt slots are invisible to later tokens", "[model]") {
  Transformer model = tiny_transformer(tiny_config(false), 4);
  RowPrompt with_dummy = prompt_of({31, 5});
  with_dummy.key_valid = {0, 1};
  with_dummy.positions = {-1, 0};
  model.start({with_dummy}, 8, 4);
  const at::Tensor a = model.forward({5}, chain({6}));
  model.start({prompt_of({5})}, 8, 4);
  const at::Tensor b = model.forward({5}, chain({6}));
  CHECK(at::allclose(a, b, 1e-5, 1e-5));
}

TEST_CASE("1D RoPE rotates (x_k, x_{k+D/2}) by pos * theta^(-2k/D)", "[model]") {
  TransformerConfig c = tiny_config(false);
  c.rope_theta = 10000.0;
  const at::Tensor x = at::randn({3, 2, 8}, at::kDouble);
  const at::Tensor pos = at::tensor({0L, 5L, 17L});
  const at::Tensor y = apply_rope(x, pos, c);
  for (int t = 0; t < 3; ++t) {
    for (int k = 0; k < 4; ++k) {
      const double angle = pos[t].item<double>() * std::pow(10000.0, -2.0 * k / 8.0);
      const double a = x[t][1][k].item<double>(), b = x[t][1][k + 4].item<double>();
      CHECK(y[t][1][k].item<double>() == Approx(a * std::cos(angle) - b * std::sin(angle)));
      CHECK(y[t][1][k + 4].item<double>() == Approx(b * std::cos(angle) + a * std::sin(angle)));
    }
  }
}

TEST_CASE("2D RoPE rotates interleaved pairs by row then column, caption slots are zeroed", "[model]") {
  TransformerConfig c = tiny_config(false);
  c.rope = RopeKind::k2d;
  c.grid_width = 4;
  const at::Tensor x = at::randn({2, 1, 8}, at::kDouble);
  const at::Tensor y = apply_rope(x, at::tensor({6L, -1L}), c);  // cell (1, 2); a caption slot
  const int row = 1, col = 2;
  for (int k = 0; k < 4; ++k) {
    const int axis_pos = k < 2 ? row : col;
    const double angle = axis_pos * std::pow(10000.0, -2.0 * (k % 2) / 4.0);
    const double a = x[0][0][2 * k].item<double>(), b = x[0][0][2 * k + 1].item<double>();
    CHECK(y[0][0][2 * k].item<double>() == Approx(a * std::cos(angle) - b * std::sin(angle)));
    CHECK(y[0][0][2 * k + 1].item<double>() == Approx(a * std::sin(angle) + b * std::cos(angle)));
  }
  CHECK(y[1].abs().max().item<double>() == 0.0);
}

TEST_CASE("a mis-shaped checkpoint tensor is named in the error", "[model]") {
  const TransformerConfig c = tiny_config(false);
  sjd::io::WeightMap w;
  w.insert("model.embed_tokens.weight", at::zeros({c.vocab_size, c.hidden_size + 1}), "bad.safetensors");
  try {
    load_transformer_weights(w, c, at::kFloat);
    FAIL("no error");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Catch::Contains("model.embed_tokens.weight") && Catch::Contains("bad.safetensors"));
  }
}

TEST_CASE("a masked placeholder root is invisible to the window's draft nodes", "[model]") {
  Transformer model = tiny_transformer(tiny_config(false), 5);
  RowPrompt placeholder;  // Lumina's unconditional row: a masked root, then generated tokens from position 0
  placeholder.tokens = {31};
  placeholder.positions = {-1};
  placeholder.key_valid = {0};
  model.start({placeholder}, 8, 4);
  const at::Tensor with_placeholder = model.forward({31}, chain({5, 6, 7}));
  model.start({prompt_of({5})}, 8, 4);
  const at::Tensor direct = model.forward({5}, chain({6, 7}));
  // Node slots 1.. of the first equal slots 0.. of the second (same tokens at positions 0, 1, 2).
  CHECK(at::allclose(with_placeholder.narrow(1, 1, 3), direct, 1e-5, 1e-5));
}

TEST_CASE("fused projections, batched rows and the cache give the unfused reference's logits", "[model]") {
  for (bool qk_norm : {false, true}) {
    const TransformerConfig c = tiny_config(qk_norm);
    const sjd::io::WeightMap w = tiny_weights(c, 7);
    Transformer model(c, load_transformer_weights(w, c, at::kFloat));
    // Two rows of different lengths (as the CFG rows are), a window of three drafts.
    model.start({prompt_of({1, 2, 3, 4}), prompt_of({5, 6})}, 16, 8);
    const at::Tensor window = model.forward({4, 6}, chain({7, 8, 9}));  // [2, 4, V]
    const at::Tensor cond = reference_logits(w, c, {1, 2, 3, 4, 7, 8, 9});
    const at::Tensor uncond = reference_logits(w, c, {5, 6, 7, 8, 9});
    const double err = std::max((window[0] - cond.narrow(0, 3, 4)).abs().max().item<double>(),
                                (window[1] - uncond.narrow(0, 1, 4)).abs().max().item<double>());
    const double scale = std::max(1.0, cond.abs().max().item<double>());
    INFO("qk_norm " << qk_norm << ": max |logit error| " << err << " of logits up to " << scale);
    CHECK(err < 1e-6 * scale);  // float32 rounding of a different operation order, nothing more
  }
}

TEST_CASE("the restricted output head gives the full head's logits for the tokens it keeps", "[model]") {
  const TransformerConfig c = tiny_config(true);
  Transformer model = tiny_transformer(c, 8);
  const std::vector<int64_t> kept = {0, 3, 4, 5, 17, 31};
  model.start({prompt_of({1, 2, 3})}, 16, 8);
  const at::Tensor full = model.forward({3}, chain({4, 5}));
  model.restrict_outputs(kept);
  model.start({prompt_of({1, 2, 3})}, 16, 8);
  const at::Tensor some = model.forward({3}, chain({4, 5}));
  const at::Tensor ids = at::tensor(kept);
  // Bit-identical on the Intel CPUs we measured; not in general: a BLAS may sum another matrix width's
  // products in another order (MKL on an AMD EPYC does), so float32 rounding is allowed.
  const double err = (some.index_select(2, ids) - full.index_select(2, ids)).abs().max().item<double>();
  const double scale = std::max(1.0, full.index_select(2, ids).abs().max().item<double>());
  INFO("max |logit difference| " << err << " of logits up to " << scale);
  CHECK(err < 1e-6 * scale);
  at::Tensor others = at::ones({c.vocab_size}, at::kBool);
  others.index_fill_(0, ids, false);
  CHECK((some.index({at::indexing::Slice(), at::indexing::Slice(), others}) == std::numeric_limits<float>::lowest())
            .all()
            .item<bool>());
  model.restrict_outputs({});  // back to every token
  model.start({prompt_of({1, 2, 3})}, 16, 8);
  CHECK(at::equal(model.forward({3}, chain({4, 5})), full));
}

TEST_CASE("rows with finished rows between them attend as each row alone", "[model]") {
  // A batch's live rows need not be consecutive in the cache (sequences finish in any order):
  // each run of consecutive rows reads its keys in place, and every row's logits equal its own run.
  Transformer model = tiny_transformer(tiny_config(true), 3);
  const std::vector<RowPrompt> prompts = {prompt_of({1, 2, 3}), prompt_of({4, 5}), prompt_of({6, 7, 8, 9}),
                                          prompt_of({2, 4}), prompt_of({3, 1, 5})};
  const DraftTree drafts = chain({7, 8});
  const auto alone = [&](size_t i) {
    model.reserve(1, 16, 16);
    model.open_row(0, prompts[i]);
    const int64_t root = prompts[i].tokens.back();
    return model.forward_rows({RowWindow{0, root, &drafts}});
  };
  std::vector<at::Tensor> expected;
  for (size_t i = 0; i < prompts.size(); ++i) expected.push_back(alone(i));

  model.reserve(static_cast<int64_t>(prompts.size()), 16, 16);
  for (size_t i = 0; i < prompts.size(); ++i) model.open_row(static_cast<int64_t>(i), prompts[i]);
  const std::vector<int64_t> live = {0, 2, 3};  // rows 1 and 4 finished
  std::vector<RowWindow> windows;
  for (int64_t r : live) windows.push_back({r, prompts[static_cast<size_t>(r)].tokens.back(), &drafts});
  const at::Tensor batched = model.forward_rows(windows);
  for (size_t w = 0; w < live.size(); ++w) {
    INFO("row " << live[w]);
    CHECK(at::allclose(batched[static_cast<int64_t>(w)], expected[static_cast<size_t>(live[w])][0], 1e-5, 1e-5));
  }
}

TEST_CASE("attention with enable_gqa gives query head h the K/V head h / group, as the repeated heads do", "[model]") {
  // The GPU path hands grouped K/V to the fused kernel with enable_gqa where it can, and repeats
  // them per query head (K/V head h feeds query heads h * group ... h * group + group - 1) where
  // it cannot: both must be the same attention. The CPU's math kernel pins PyTorch's mapping.
  at::manual_seed(5);
  const at::Tensor q = at::randn({2, 4, 3, 8}), k = at::randn({2, 2, 5, 8}), v = at::randn({2, 2, 5, 8});
  at::Tensor bias = at::zeros({2, 1, 3, 5});
  bias.index_put_({0, 0, 0, 4}, -INFINITY);
  const at::Tensor grouped = at::scaled_dot_product_attention(q, k, v, bias, 0.0, false, std::nullopt, true);
  const auto repeated = [&](const at::Tensor& x) {
    return x.unsqueeze(2).expand({2, 2, 2, 5, 8}).reshape({2, 4, 5, 8});  // the transformer's repeat_heads
  };
  CHECK(at::allclose(grouped, at::scaled_dot_product_attention(q, repeated(k), repeated(v), bias), 1e-6, 1e-6));
  // The other plausible mapping (query head h uses K/V head h % kv_heads) is a different attention.
  const at::Tensor tiled = at::scaled_dot_product_attention(q, k.repeat({1, 2, 1, 1}), v.repeat({1, 2, 1, 1}), bias);
  CHECK_FALSE(at::allclose(grouped, tiled, 1e-3, 1e-3));
}

TEST_CASE("rows of very different lengths attend as each row alone", "[model]") {
  // On the CPU a run of rows is cut where the lengths drift apart by more than kCpuKeySpread,
  // and each part reads only the keys of its own longest row (a continuous batch refills a slot
  // with a short sequence beside long ones). Cutting at the wrong length would drop a long
  // row's keys or read a short row's stale slots.
  Transformer model = tiny_transformer(tiny_config(true), 5);
  const auto tokens_of = [](int64_t n, int64_t salt) {
    std::vector<int64_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back((i * 7 + salt) % 29 + 1);
    return t;
  };
  const int64_t spread = Transformer::kCpuKeySpread;
  const std::vector<RowPrompt> prompts = {prompt_of(tokens_of(2 * spread + 40, 1)), prompt_of(tokens_of(3, 2)),
                                          prompt_of(tokens_of(20, 3)), prompt_of(tokens_of(spread + 60, 4)),
                                          prompt_of(tokens_of(spread + 10, 5))};
  const int64_t capacity = 2 * spread + 64;
  // Row 2's window is narrower than the batch's: its padding slots must stay masked inside its part.
  const DraftTree wide = chain({7, 8, 9}), narrow = chain({5});
  const auto drafts_of = [&](size_t i) { return i == 2 ? &narrow : &wide; };
  const auto alone = [&](size_t i) {
    model.reserve(1, capacity, capacity);
    model.open_row(0, prompts[i]);
    return model.forward_rows({RowWindow{0, prompts[i].tokens.back(), drafts_of(i)}});
  };
  std::vector<at::Tensor> expected;
  for (size_t i = 0; i < prompts.size(); ++i) expected.push_back(alone(i));

  model.reserve(static_cast<int64_t>(prompts.size()), capacity, capacity);
  std::vector<RowWindow> windows;
  for (size_t i = 0; i < prompts.size(); ++i) {
    model.open_row(static_cast<int64_t>(i), prompts[i]);
    windows.push_back({static_cast<int64_t>(i), prompts[i].tokens.back(), drafts_of(i)});
  }
  const at::Tensor batched = model.forward_rows(windows);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("row " << i << " of " << prompts[i].tokens.size() << " prompt tokens");
    const int64_t width = expected[i].size(1);  // a narrower row's logits are the first slots of its window
    CHECK(at::allclose(batched[static_cast<int64_t>(i)].narrow(0, 0, width), expected[i][0], 1e-5, 1e-5));
  }
}

TEST_CASE("the fused layer kernels are GPU only: a CPU transformer keeps its ATen path", "[model]") {
  Transformer m = tiny_transformer(tiny_config(true), 5);
  m.use_fused_layer_ops(true);
  CHECK_FALSE(m.fused_layer_ops());
  if (!fused_layer_ops_built()) {
    const at::Tensor x = at::ones({2, 8});
    CHECK_THROWS_WITH(fused_silu_mul(x), Catch::Contains("fused_silu_mul") && Catch::Contains("no CUDA"));
  } else {  // a CUDA build refuses CPU tensors by name
    CHECK_THROWS_WITH(fused_silu_mul(at::ones({2, 8})), Catch::Contains("gate_up") && Catch::Contains("contiguous"));
  }
}

TEST_CASE("a cache at least as large is kept: a smaller reservation reuses it, a larger or another row count remakes it",
          "[model]") {
  Transformer model = tiny_transformer(tiny_config(false), 4);
  const auto keys = [&] { return model.cache().key_buffer(0).data_ptr(); };
  model.reserve(2, 40, 40);
  const void* first = keys();
  const DraftTree drafts = chain({7, 8});
  model.open_row(0, prompt_of({4, 5, 6, 7, 8}));  // keys the next run must not see
  model.forward_rows({RowWindow{0, 8, &drafts}});
  model.reserve(2, 20, 20);  // compare's next method may need less
  CHECK(keys() == first);
  CHECK(model.cache().capacity() == 40);
  CHECK(model.cache().length(0) == 0);  // emptied all the same
  model.open_row(0, prompt_of({1, 2, 3}));
  // The same logits as a model whose cache was made at the smaller size.
  Transformer fresh = tiny_transformer(tiny_config(false), 4);
  fresh.reserve(2, 20, 20);
  fresh.open_row(0, prompt_of({1, 2, 3}));
  CHECK(at::equal(model.forward_rows({RowWindow{0, 3, &drafts}}), fresh.forward_rows({RowWindow{0, 3, &drafts}})));
  model.reserve(2, 41, 41);
  CHECK(model.cache().capacity() == 41);
  model.reserve(3, 10, 10);
  CHECK(model.cache().rows() == 3);
}
