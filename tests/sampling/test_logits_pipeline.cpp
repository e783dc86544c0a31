// The logits pipeline against direct formulas.
#include <catch2/catch.hpp>

#include <limits>

#include "sampling/categorical.h"
#include "sampling/logits_pipeline.h"
#include "sampling/relaxation.h"

using namespace sjd::sampling;

TEST_CASE("CFG mixes logits or log-probs as the family says", "[pipeline]") {
  const at::Tensor cond = at::tensor({1.0f, 2.0f, 0.5f, -1.0f});
  const at::Tensor uncond = at::tensor({0.5f, 0.0f, 1.0f, 0.0f});
  const at::Tensor logits = at::stack({cond, uncond}).unsqueeze(1);  // [2, 1, 4]
  PipelineSettings s;
  s.cfg_scale = 3.0;
  at::Tensor p = run_logits_pipeline(logits, {SlotConstraint{}}, s);
  CHECK(at::allclose(p[0], at::softmax(uncond + 3.0 * (cond - uncond), 0)));
  s.cfg_mix = CfgMix::kLogProbs;
  p = run_logits_pipeline(logits, {SlotConstraint{}}, s);
  const at::Tensor lu = at::log_softmax(uncond, 0);
  CHECK(at::allclose(p[0], at::softmax(lu + 3.0 * (at::log_softmax(cond, 0) - lu), 0)));
  s.cfg_scale = 1.0;  // guidance off: the unconditional row is ignored
  p = run_logits_pipeline(logits, {SlotConstraint{}}, s);
  CHECK(at::allclose(p[0], at::softmax(cond, 0)));
}

TEST_CASE("a CFG scale that is 1 in float mixes nothing, as on the GPU", "[pipeline]") {
  // The CUDA pipeline takes the scale as a float; mixing by 1.0f is not exact (u + (c - u) rounds).
  const at::Tensor logits = at::randn({2, 1, 4096}, at::TensorOptions().dtype(at::kFloat)) * 8;
  PipelineSettings s;
  s.cfg_scale = 1.0;
  const at::Tensor unmixed = run_logits_pipeline(logits, {SlotConstraint{}}, s);
  s.cfg_scale = 1.0 + 1e-9;
  CHECK(at::equal(run_logits_pipeline(logits, {SlotConstraint{}}, s), unmixed));
  s.cfg_scale = 1.0 + 1e-6;  // a float of its own: mixed
  CHECK_FALSE(at::equal(run_logits_pipeline(logits, {SlotConstraint{}}, s), unmixed));
}

TEST_CASE("constraints, temperature and top-k", "[pipeline]") {
  const at::Tensor logits = at::tensor({3.0f, 1.0f, 2.0f, 0.0f, -1.0f, 2.5f}).view({1, 1, 6});
  PipelineSettings s;
  SlotConstraint forced;
  forced.forced = 4;
  at::Tensor p = run_logits_pipeline(logits, {forced}, s);
  CHECK(p[0][4].item<float>() == 1.0f);
  CHECK(p[0].sum().item<float>() == Approx(1.0f));

  SlotConstraint mask;
  mask.allowed = at::tensor({0, 1, 1, 1, 0, 1}).to(at::kBool);
  s.temperature = 0.5;
  s.top_k = 2;
  p = run_logits_pipeline(logits, {mask}, s)[0];
  // Allowed {1,2,3,5}; the two best are 5 (2.5) and 2 (2.0); temperature 0.5.
  const at::Tensor expected = at::softmax(at::tensor({2.0f, 2.5f}) / 0.5, 0);
  CHECK(p[2].item<float>() == Approx(expected[0].item<float>()));
  CHECK(p[5].item<float>() == Approx(expected[1].item<float>()));
  CHECK((p > 0).sum().item<int64_t>() == 2);
  CHECK(p[0].item<float>() == 0.0f);  // the global argmax is masked out

  s.temperature = 0.0;  // greedy: a point mass on the best allowed token
  p = run_logits_pipeline(logits, {mask}, s)[0];
  CHECK(p[5].item<float>() == 1.0f);
}

TEST_CASE("a slot forced past the vocabulary is refused, not written past the probabilities", "[pipeline]") {
  const at::Tensor logits = at::zeros({1, 2, 6});
  SlotConstraint last, past;
  last.forced = 5;
  past.forced = 6;
  CHECK(run_logits_pipeline(logits, {SlotConstraint{}, last}, PipelineSettings{})[1][5].item<float>() == 1.0f);
  CHECK_THROWS_WITH(run_logits_pipeline(logits, {SlotConstraint{}, past}, PipelineSettings{}),
                    Catch::Contains("forced to token 6, past the vocabulary of 6"));
}

TEST_CASE("LANTERN neighbourhoods come from codebook distances", "[pipeline][lossy]") {
  // Codes on a line: 0, 1, 3, 10. Nearest of code 0: 1 then 3.
  const at::Tensor codebook = at::tensor({0.0f, 1.0f, 3.0f, 10.0f}).view({4, 1});
  const at::Tensor table = lantern_neighbours(codebook, 2, /*first_token_id=*/5, /*vocab=*/12);
  CHECK(table.size(0) == 12);
  CHECK(table[5][0].item<int64_t>() == 6);
  CHECK(table[5][1].item<int64_t>() == 7);
  CHECK(table[8][0].item<int64_t>() == 7);  // code 3 (=10): nearest is code 2 (=3)
  CHECK(table[0][0].item<int64_t>() == -1);  // not an image token
  Relaxation lantern;
  lantern.kind = RelaxKind::kLantern;
  lantern.lantern_k = 2;
  lantern.lantern_lambda = 2.0;
  lantern.neighbours = table;
  std::vector<float> p(12, 0.0f);
  p[5] = 0.2f;
  p[6] = 0.3f;
  p[7] = 0.3f;
  p[8] = 0.2f;
  // Code 0's neighbours add 0.3 (< 2 * 0.2), then 0.3 more would reach 0.6 >= 0.4: stop.
  CHECK(relaxed_score(lantern, p.data(), 5, 1.0) == Approx(0.5));
}

TEST_CASE("greedy gives no mass to a slot whose largest logit is not finite", "[pipeline][robustness]") {
  // Slots: plain; a NaN; +inf; every token masked. -inf alone (a masked token) is an ordinary logit.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, -inf}).repeat({1, 4, 1});  // [1, 4, 4]
  logits[0][1][2] = nan;
  logits[0][2][0] = inf;
  SlotConstraint none_allowed;
  none_allowed.allowed = at::zeros({4}, at::kBool);
  PipelineSettings greedy;
  greedy.temperature = 0.0;
  const at::Tensor p = run_logits_pipeline(logits, {SlotConstraint{}, SlotConstraint{}, SlotConstraint{}, none_allowed},
                                           greedy);
  CHECK(at::equal(p[0], at::tensor({0.0f, 1.0f, 0.0f, 0.0f})));
  for (int slot = 1; slot < 4; ++slot) {
    INFO("slot " << slot);
    CHECK(at::equal(p[slot], at::zeros({4})));
  }
  // The greedy choice refuses such a row, as a draw does.
  CHECK(argmax(p[0].contiguous().data_ptr<float>(), 4) == 1);
  CHECK_THROWS_WITH(argmax(p[1].contiguous().data_ptr<float>(), 4), Catch::Contains("no token has a positive"));
}
