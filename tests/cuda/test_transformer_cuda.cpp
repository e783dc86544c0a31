// The transformer on the device against the same weights on the CPU: prefill,
// chain and tree windows, CFG rows of different lengths, commits; MHA and GQA
// (where the fused kernel may read grouped K/V in place), with and without
// qk-norm. In f32 the logits agree within 1e-4 of their scale (the GPU's
// matmuls and fused attention only round differently; LibTorch leaves TF32
// off); in bf16 within a coarse bound that a wrong mask or head mapping breaks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ATen/DeviceAccelerator.h>

#include "device_cases.h"
#include "model/transformer.h"
#include "tiny_transformer.h"

using namespace sjd;

namespace {

model::RowPrompt prompt_of(std::vector<int64_t> tokens) {
  model::RowPrompt r;
  r.tokens = std::move(tokens);
  for (size_t i = 0; i < r.tokens.size(); ++i) r.positions.push_back(static_cast<int64_t>(i));
  r.key_valid.assign(r.tokens.size(), 1);
  return r;
}

model::DraftTree chain(const std::vector<int64_t>& tokens) {
  model::DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i) t.push(tokens[i], static_cast<int>(i) - 1);
  return t;
}

// Two branches under the root and one under the first node: what SJD-PAC's tree windows look like.
model::DraftTree tree() {
  model::DraftTree t;
  t.push(11, -1);
  t.push(12, 0);
  t.push(13, -1);
  t.push(14, 2);
  t.push(15, 0);
  return t;
}

// The tiny GQA model with qk-norm twice on the device, from the same weights: one steps eagerly,
// the other through CUDA graphs.
struct EagerAndGraphed {
  std::unique_ptr<model::Transformer> eager, graphed;
};

EagerAndGraphed eager_and_graphed(uint64_t weights_seed) {
  const at::Device device = cuda_testing::device();
  const model::TransformerConfig c = testing::tiny_config(true, 2);
  const io::WeightMap w = testing::tiny_weights(c, weights_seed);
  EagerAndGraphed m{std::make_unique<model::Transformer>(c, model::load_transformer_weights(w, c, at::kFloat, device)),
                    std::make_unique<model::Transformer>(c, model::load_transformer_weights(w, c, at::kFloat, device))};
  m.eager->use_step_graphs(false);
  m.graphed->use_step_graphs(true);
  // PyTorch's attention on both sides: a fault of the window attention fails its own tags, not [graphs]
  // (device_check.sh turns off what a failing tag names).
  for (model::Transformer* t : {m.eager.get(), m.graphed.get()}) t->use_window_attention(false);
  return m;
}

// max |a - b| over max(1, max |a|).
double relative_error(const at::Tensor& expected, const at::Tensor& got) {
  const at::Tensor a = expected.to(at::kFloat), b = got.to(at::kCPU).to(at::kFloat);
  return (a - b).abs().max().item<double>() / std::max(1.0, a.abs().max().item<double>());
}

}  // namespace

TEST_CASE("the transformer on the device gives the CPU's logits: chain and tree windows, MHA and GQA", "[cuda]") {
  const at::Device device = cuda_testing::device();
  for (const int64_t kv_heads : {4, 2, 1}) {
    for (const bool qk_norm : {false, true}) {
      for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        const model::TransformerConfig c = testing::tiny_config(qk_norm, kv_heads);
        const io::WeightMap w = testing::tiny_weights(c, 11);
        model::Transformer on_cpu(c, model::load_transformer_weights(w, c, at::kFloat));
        model::Transformer on_gpu(c, model::load_transformer_weights(w, c, dtype, device));
        const double bound = dtype == at::kFloat ? 1e-4 : 0.1;
        for (model::Transformer* m : {&on_cpu, &on_gpu}) m->start({prompt_of({1, 2, 3, 4, 5}), prompt_of({6, 7})}, 24, 8);

        const at::Tensor first = on_cpu.forward({5, 7}, chain({8, 9, 10}));
        const at::Tensor first_gpu = on_gpu.forward({5, 7}, chain({8, 9, 10}));
        INFO("kv heads " << kv_heads << ", qk-norm " << qk_norm << ", " << c10::toString(dtype) << ", attention "
                         << on_gpu.attention_backend());
        CHECK(first_gpu.device() == device);
        CHECK(relative_error(first, first_gpu) < bound);
        // Which kernel PyTorch picks is the GPU's business; the label must say how GQA was served.
        if (kv_heads < c.num_heads) {
          CHECK_THAT(on_gpu.attention_backend(),
                     Catch::EndsWith(", GQA in the kernel") || Catch::EndsWith(", K/V heads repeated for GQA"));
        } else {
          CHECK_THAT(on_gpu.attention_backend(), !Catch::Contains("GQA") && !Catch::Contains("none"));
        }

        for (model::Transformer* m : {&on_cpu, &on_gpu}) m->commit({0, 1});
        CHECK(relative_error(on_cpu.forward({9, 9}, tree()), on_gpu.forward({9, 9}, tree())) < bound);
        for (model::Transformer* m : {&on_cpu, &on_gpu}) m->commit({2, 3});  // a branch off the spine
        CHECK(relative_error(on_cpu.forward({14, 14}, model::DraftTree{}), on_gpu.forward({14, 14}, model::DraftTree{})) <
              bound);
      }
    }
  }
}

namespace {

// Five steps of a 250-token prompt and a short one, four keys committed a step, on model `m`: its
// logits at each step. On a GPU the eager forward's key count goes up in buckets of
// Transformer::kKeyBucket (256), capped at the cache's capacity, and a graphed one spans the capacity.
// The capacity is 283 (prompt, 24 tokens, a window of 8 and one): the first step attends over 256
// keys, the later ones over all 283.
std::vector<at::Tensor> steps_across_a_key_bucket(model::Transformer& m) {
  std::vector<int64_t> long_prompt;
  for (int64_t i = 0; i < 250; ++i) long_prompt.push_back(1 + i % 30);
  m.start({prompt_of(long_prompt), prompt_of({6, 7})}, 24, 8);
  std::vector<at::Tensor> logits;
  int64_t root = 5;
  for (int step = 0; step < 5; ++step) {  // four keys a step from 250 (and the window's 4): past 256 at the second
    logits.push_back(m.forward({root, root}, chain({8, 9, 10})).to(at::kCPU));
    m.commit({0, 1, 2});
    root = 11 + step;
  }
  return logits;
}

}  // namespace

TEST_CASE("steps across a key bucket's edge give the CPU's logits on the device", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const model::TransformerConfig c = testing::tiny_config(true, 2);
  const io::WeightMap w = testing::tiny_weights(c, 13);
  model::Transformer on_cpu(c, model::load_transformer_weights(w, c, at::kFloat));
  model::Transformer eager(c, model::load_transformer_weights(w, c, at::kFloat, device));
  eager.use_step_graphs(false);
  const std::vector<at::Tensor> expected = steps_across_a_key_bucket(on_cpu);
  const std::vector<at::Tensor> got = steps_across_a_key_bucket(eager);
  for (size_t step = 0; step < expected.size(); ++step) {
    INFO("step " << step);
    CHECK(relative_error(expected[step], got[step]) < 1e-4);
  }
}

// Graphed against eager on the device (the case above holds eager to the CPU), so that only a fault
// of the graphs fails it: device_check switches graphs off when a [graphs] case fails.
TEST_CASE("steps across a key bucket's edge replayed from a CUDA graph give the eager steps' logits", "[cuda][graphs]") {
  const EagerAndGraphed models = eager_and_graphed(13);
  const std::vector<at::Tensor> expected = steps_across_a_key_bucket(*models.eager);
  const std::vector<at::Tensor> got = steps_across_a_key_bucket(*models.graphed);
  INFO("graphs failure '" << models.graphed->step_graphs_failure() << "'");
  for (size_t step = 0; step < expected.size(); ++step) {
    INFO("step " << step);
    CHECK(relative_error(expected[step], got[step]) < 1e-4);
  }
  CHECK(models.graphed->captured_step_graphs() == 1);
}

TEST_CASE("window forwards replayed from CUDA graphs give the eager forward's logits, step after step", "[cuda][graphs]") {
  // The graph's attention spans the cache's whole capacity (the rows' lengths are data, not
  // shapes), so its sums may see more masked keys than the eager forward's: equal within
  // rounding. bf16 is the production case (cuDNN's attention where PyTorch picks it). With a
  // restricted head the graph ends at the head's columns and the full width is filled after it.
  const at::Device device = cuda_testing::device();
  std::vector<int64_t> head_ids;
  for (int64_t id = 1; id < 32; id += 3) head_ids.push_back(id);
  const at::Tensor kept = at::tensor(head_ids, at::kLong);
  const at::Tensor dropped = at::ones({32}, at::kBool).index_fill_(0, kept, false);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t kv_heads : {4, 2}) {
      for (const bool restricted : {false, true}) {
        const model::TransformerConfig c = testing::tiny_config(true, kv_heads);
        const io::WeightMap w = testing::tiny_weights(c, 12);
        model::Transformer eager(c, model::load_transformer_weights(w, c, dtype, device));
        model::Transformer graphed(c, model::load_transformer_weights(w, c, dtype, device));
        eager.use_step_graphs(false);
        graphed.use_step_graphs(true);
        for (model::Transformer* m : {&eager, &graphed}) m->use_window_attention(false);  // as eager_and_graphed
        if (restricted) {
          for (model::Transformer* m : {&eager, &graphed}) m->restrict_outputs(head_ids);
        }
        for (model::Transformer* m : {&eager, &graphed}) m->start({prompt_of({1, 2, 3, 4, 5}), prompt_of({6, 7})}, 24, 8);
        int64_t root = 5;
        for (int step = 0; step < 8; ++step) {
          // Windows of two shapes, each met several times: the first meeting captures, later ones replay.
          const model::DraftTree nodes = step % 2 == 0 ? chain({8, 9, 10}) : model::DraftTree{};
          const at::Tensor expected = eager.forward({root, root}, nodes);
          const at::Tensor got = graphed.forward({root, root}, nodes);
          INFO(c10::toString(dtype) << ", kv heads " << kv_heads << ", restricted head " << restricted << ", step "
                                    << step << ", attention " << graphed.attention_backend() << ", graphs failure '"
                                    << graphed.step_graphs_failure() << "'");
          const double bound = dtype == at::kFloat ? 1e-5 : 0.05;
          if (restricted) {
            CHECK(got.size(2) == 32);
            CHECK(relative_error(expected.to(at::kCPU).index_select(2, kept), got.to(at::kCPU).index_select(2, kept)) <
                  bound);
            CHECK(got.to(at::kCPU).index_select(2, dropped.nonzero().squeeze(1)).eq(std::numeric_limits<float>::lowest())
                      .all()
                      .item<bool>());
          } else {
            CHECK(relative_error(expected.to(at::kCPU), got) < bound);
          }
          const std::vector<int> path = nodes.size() > 0 ? std::vector<int>{0} : std::vector<int>{};
          for (model::Transformer* m : {&eager, &graphed}) m->commit(path);
          root = 11 + step;
        }
        CHECK(graphed.captured_step_graphs() == 2);
        CHECK(eager.captured_step_graphs() == 0);
      }
    }
  }
}

TEST_CASE("a restricted head leaves the device until the whole head is asked for again", "[cuda]") {
  const at::Device device = cuda_testing::device();
  model::TransformerConfig c = testing::tiny_config(false, 4);
  c.vocab_size = 4096;  // a head of 4096 x 32 floats: 512 kB, well above the allocator's rounding
  const io::WeightMap w = testing::tiny_weights(c, 16);
  model::Transformer m(c, model::load_transformer_weights(w, c, at::kFloat, device));
  const auto allocated = [&] {
    const auto stats = at::accelerator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
  };
  m.start({prompt_of({1, 2, 3})}, 8, 4);
  const at::Tensor whole = m.forward({3}, chain({5, 6})).to(at::kCPU);
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < c.vocab_size; id += 64) ids.push_back(id);
  const int64_t before = allocated();
  m.restrict_outputs(ids);
  const int64_t head_bytes = c.vocab_size * c.hidden_size * 4;
  CHECK(before - allocated() >= head_bytes * 3 / 4);  // the whole head left; 64 of its rows stayed
  m.start({prompt_of({1, 2, 3})}, 8, 4);
  const at::Tensor some = m.forward({3}, chain({5, 6})).to(at::kCPU);
  const at::Tensor kept = at::tensor(ids, at::kLong);
  CHECK(relative_error(whole.index_select(2, kept), some.index_select(2, kept)) < 1e-5);
  m.restrict_outputs({});
  CHECK(allocated() - before >= -head_bytes / 4);  // back on the device
  m.start({prompt_of({1, 2, 3})}, 8, 4);
  CHECK(relative_error(whole, m.forward({3}, chain({5, 6}))) < 1e-5);
}

TEST_CASE("a KV cache rebuilt for another size never lives beside the old one", "[cuda]") {
  // The bench's prefill and mid-image fixtures, compare's methods and the calibration's batch sizes
  // each reserve another capacity: the peak must hold one cache, not two.
  const at::Device device = cuda_testing::device();
  const model::TransformerConfig c = testing::tiny_config(false, 4);
  const io::WeightMap w = testing::tiny_weights(c, 18);
  model::Transformer m(c, model::load_transformer_weights(w, c, at::kFloat, device));
  const c10::DeviceIndex index = device.has_index() ? device.index() : at::accelerator::getDeviceIndex();
  const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  // K and V of 2 layers x 4 heads x 8 dims in f32: 512 bytes per slot and row, 2 kB per slot of the 4 rows.
  const int64_t old_slots = 30000, new_slots = 32768;
  m.reserve(4, old_slots, 64);
  const int64_t before = at::accelerator::getDeviceStats(index).allocated_bytes[agg].current;
  at::accelerator::resetPeakStats(index);
  m.reserve(4, new_slots, 64);
  const auto stats = at::accelerator::getDeviceStats(index);
  const int64_t new_bytes = new_slots * 2048;
  INFO("before " << before << ", peak " << stats.allocated_bytes[agg].peak << ", new cache " << new_bytes);
  CHECK(m.cache().capacity() == new_slots);
  CHECK(stats.allocated_bytes[agg].current < before + new_bytes / 2);  // the old cache is gone
  CHECK(stats.allocated_bytes[agg].peak < before + new_bytes / 2);     // and was gone before the new one came
  // A smaller reservation keeps the cache as it is: nothing freed, nothing made.
  m.reserve(4, 1000, 64);
  CHECK(m.cache().capacity() == new_slots);
  CHECK(at::accelerator::getDeviceStats(index).allocated_bytes[agg].current == stats.allocated_bytes[agg].current);
}

TEST_CASE("windows of neighbouring widths share one padded graph and give the eager forward's logits", "[cuda][graphs]") {
  // 5 and 6 drafted nodes both run in the graph of 6 (StepGraphs::padded_width); the padding's
  // extra slots see only themselves, so the real slots' logits are the eager forward's.
  const EagerAndGraphed models = eager_and_graphed(15);
  model::Transformer& eager = *models.eager;
  model::Transformer& graphed = *models.graphed;
  for (model::Transformer* m : {&eager, &graphed}) m->start({prompt_of({1, 2, 3, 4, 5}), prompt_of({6, 7})}, 40, 12);
  int64_t root = 5;
  for (int step = 0; step < 4; ++step) {
    const model::DraftTree nodes = step % 2 == 0 ? chain({8, 9, 10, 11, 12}) : chain({13, 14, 15, 16, 17, 18});
    const at::Tensor expected = eager.forward({root, root}, nodes);
    const at::Tensor got = graphed.forward({root, root}, nodes);
    INFO("step " << step << ", graphs failure '" << graphed.step_graphs_failure() << "'");
    CHECK(got.sizes() == expected.sizes());  // the real width, not the padded one
    CHECK(relative_error(expected.to(at::kCPU), got) < 1e-5);
    for (model::Transformer* m : {&eager, &graphed}) m->commit({0, 1});
    root = 20 + step;
  }
  CHECK(graphed.step_graphs_failure().empty());
  CHECK(graphed.captured_step_graphs() == 1);

  // A larger cache is a rebuild (capacity 5 + 60 + 12 + 1 = 78 against 58; a smaller reservation
  // keeps the cache and its graphs): the rebuild drops the graph, whose memory pool's last use goes
  // with it, and PyTorch refuses to capture into such a pool (the graphs would switch off). The next
  // step captures again, into a new pool.
  for (model::Transformer* m : {&eager, &graphed}) m->start({prompt_of({1, 2, 3, 4, 5}), prompt_of({6, 7})}, 60, 12);
  CHECK(graphed.captured_step_graphs() == 0);
  const model::DraftTree five = chain({8, 9, 10, 11, 12});
  for (int round = 0; round < 2; ++round) {  // a capture, then a replay
    INFO("round " << round << ", graphs failure '" << graphed.step_graphs_failure() << "'");
    CHECK(relative_error(eager.forward({5, 7}, five).to(at::kCPU), graphed.forward({5, 7}, five)) < 1e-5);
    for (model::Transformer* m : {&eager, &graphed}) m->commit({0});
  }
  CHECK(graphed.step_graphs_failure().empty());
  CHECK(graphed.captured_step_graphs() == 1);
}

TEST_CASE("a window whose padding has no room in the cache runs eagerly on the device", "[cuda][graphs]") {
  // Capacity 5 + 4 + 1 = 10 and row 0 holds 4 keys: room 6 for a width of 6, padded 7. That step
  // runs eagerly instead of capturing a width of its own. Fresh models: a cache reserved larger
  // before would be kept, with room to spare.
  const EagerAndGraphed models = eager_and_graphed(15);
  model::Transformer& eager = *models.eager;
  model::Transformer& graphed = *models.graphed;
  for (model::Transformer* m : {&eager, &graphed}) m->start({prompt_of({1, 2, 3, 4, 5}), prompt_of({6, 7})}, 0, 4);
  CHECK(graphed.cache().capacity() == 10);
  const model::DraftTree five = chain({8, 9, 10, 11, 12});
  CHECK(relative_error(eager.forward({5, 7}, five).to(at::kCPU), graphed.forward({5, 7}, five)) < 1e-5);
  CHECK(graphed.captured_step_graphs() == 0);
  CHECK(graphed.step_graphs_failure().empty());
}

TEST_CASE("rows that are not neighbours in the cache attend in separate runs on the device as on the CPU", "[cuda]") {
  // A batch whose finished sequences left gaps: rows {0, 1, 4, 5} of six, of different lengths,
  // attend in two runs of consecutive rows, each with its own slice of the bias.
  const at::Device device = cuda_testing::device();
  const model::TransformerConfig c = testing::tiny_config(true, 2);
  const io::WeightMap w = testing::tiny_weights(c, 13);
  model::Transformer on_cpu(c, model::load_transformer_weights(w, c, at::kFloat));
  model::Transformer on_gpu(c, model::load_transformer_weights(w, c, at::kFloat, device));
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4, 5}, {6}, {7, 8}, {9, 10, 11, 12}, {13}};
  for (model::Transformer* m : {&on_cpu, &on_gpu}) {
    m->reserve(6, 16, 24);
    for (size_t r = 0; r < prompts.size(); ++r) m->open_row(static_cast<int64_t>(r), prompt_of(prompts[r]));
  }
  const model::DraftTree nodes = chain({20, 21});
  std::vector<model::RowWindow> windows;
  for (const int64_t r : {0, 1, 4, 5}) windows.push_back({r, prompts[static_cast<size_t>(r)].back(), &nodes});
  const at::Tensor expected = on_cpu.forward_rows(windows);
  const at::Tensor got = on_gpu.forward_rows(windows);
  CHECK(got.device() == device);
  CHECK(relative_error(expected, got) < 1e-4);
}

namespace {

// Continuous batching: row 1 finishes after three steps and takes the next prompt while row 0 is
// mid-image. Each row's roots follow a rule of its own, so a row decoded alone can be compared.
struct RefillScenario {
  model::RowPrompt first = prompt_of({1, 2, 3, 4, 5}), second = prompt_of({6, 7}), refill = prompt_of({9, 3, 8});
  model::DraftTree nodes = chain({10, 11});
  std::vector<int> path = {0};
  static constexpr int kSteps = 5, kRefillStep = 3;
  static int64_t row0_root(int step) { return 20 + step; }
  static int64_t row1_root(int step) { return 25 + step; }

  // The logits of `prompt` decoded alone on `m`, one [1 + window, V] per step.
  std::vector<at::Tensor> alone(model::Transformer& m, const model::RowPrompt& prompt, int steps,
                                int64_t (*next_root)(int)) const {
    m.reserve(1, 40, 64);
    m.open_row(0, prompt);
    std::vector<at::Tensor> logits;
    int64_t root = prompt.tokens.back();
    for (int step = 0; step < steps; ++step) {
      logits.push_back(m.forward_rows({model::RowWindow{0, root, &nodes}}).to(at::kCPU)[0]);
      m.commit_rows({model::RowPath{0, &path}});
      root = next_root(step);
    }
    return logits;
  }

  // The batch's logits on `m`, one [2, 1 + window, V] per step, the refill between steps.
  std::vector<at::Tensor> batch(model::Transformer& m) const {
    m.reserve(2, 40, 64);
    m.open_row(0, first);
    m.open_row(1, second);
    std::vector<at::Tensor> logits;
    int64_t root0 = first.tokens.back(), root1 = second.tokens.back();
    for (int step = 0; step < kSteps; ++step) {
      if (step == kRefillStep) {  // row 1 is done: the next prompt takes its slot
        m.open_row(1, refill);
        root1 = refill.tokens.back();
      }
      logits.push_back(m.forward_rows({{0, root0, &nodes}, {1, root1, &nodes}}).to(at::kCPU));
      m.commit_rows({model::RowPath{0, &path}, model::RowPath{1, &path}});
      root0 = row0_root(step);
      root1 = row1_root(step - kRefillStep);
    }
    return logits;
  }
};

}  // namespace

TEST_CASE("a slot refilled mid-batch gives the new prompt's logits on the device", "[cuda]") {
  // Eagerly: each row's logits are those of its prompt decoded alone on a fresh model, step after step.
  const EagerAndGraphed models = eager_and_graphed(16);
  models.graphed->use_step_graphs(false);
  const RefillScenario s;
  const std::vector<at::Tensor> row0 = s.alone(*models.eager, s.first, RefillScenario::kSteps, RefillScenario::row0_root);
  const std::vector<at::Tensor> row1 =
      s.alone(*models.eager, s.refill, RefillScenario::kSteps - RefillScenario::kRefillStep, RefillScenario::row1_root);
  const std::vector<at::Tensor> got = s.batch(*models.graphed);
  for (int step = 0; step < RefillScenario::kSteps; ++step) {
    INFO("step " << step);
    CHECK(relative_error(row0[static_cast<size_t>(step)], got[static_cast<size_t>(step)][0]) < 1e-5);
    if (step >= RefillScenario::kRefillStep) {
      CHECK(relative_error(row1[static_cast<size_t>(step - RefillScenario::kRefillStep)], got[static_cast<size_t>(step)][1]) < 1e-5);
    }
  }
}

TEST_CASE("a slot refilled mid-batch replays the batch's graph with the eager batch's logits", "[cuda][graphs]") {
  // The same batch through one captured shape, replayed across the refill, against itself eagerly
  // (the case above holds the eager batch to the rows decoded alone).
  const EagerAndGraphed models = eager_and_graphed(16);
  const RefillScenario s;
  const std::vector<at::Tensor> expected = s.batch(*models.eager);
  const std::vector<at::Tensor> got = s.batch(*models.graphed);
  INFO("graphs failure '" << models.graphed->step_graphs_failure() << "'");
  for (int step = 0; step < RefillScenario::kSteps; ++step) {
    INFO("step " << step);
    CHECK(relative_error(expected[static_cast<size_t>(step)], got[static_cast<size_t>(step)]) < 1e-5);
  }
  CHECK(models.graphed->step_graphs_failure().empty());
  CHECK(models.graphed->captured_step_graphs() == 1);  // one shape, replayed across the refill
}
