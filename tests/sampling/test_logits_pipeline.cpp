// The logits pipeline against direct formulas.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

namespace {

// The pipeline's law for one slot, in doubles and plain loops: guidance, the slot's mask, temperature, the
// k best allowed tokens, softmax. Independent of the ATen ops the pipeline uses.
std::vector<double> expected_slot(const std::vector<double>& cond, const std::vector<double>& uncond,
                                  const std::vector<bool>& allowed, const PipelineSettings& s) {
  const size_t vocab = cond.size();
  const auto log_softmax = [](const std::vector<double>& x) {
    double top = x[0], sum = 0.0;
    for (double v : x) top = std::max(top, v);
    for (double v : x) sum += std::exp(v - top);
    std::vector<double> out;
    for (double v : x) out.push_back(v - top - std::log(sum));
    return out;
  };
  std::vector<double> c = cond, u = uncond;
  if (s.cfg_mix == CfgMix::kLogProbs) {
    c = log_softmax(cond);
    u = log_softmax(uncond);
  }
  std::vector<double> z(vocab);
  for (size_t v = 0; v < vocab; ++v) z[v] = (u[v] + s.cfg_scale * (c[v] - u[v])) / s.temperature;
  std::vector<double> kept;  // the allowed scores, best first
  for (size_t v = 0; v < vocab; ++v) {
    if (allowed[v]) kept.push_back(z[v]);
  }
  std::sort(kept.rbegin(), kept.rend());
  const double threshold = kept[std::min<size_t>(static_cast<size_t>(s.top_k), kept.size()) - 1];
  double top = kept[0], sum = 0.0;
  std::vector<double> p(vocab, 0.0);
  for (size_t v = 0; v < vocab; ++v) {
    if (allowed[v] && z[v] >= threshold) sum += (p[v] = std::exp(z[v] - top));
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

TEST_CASE("guidance, masks, temperature and top-k together give the formula's law, slot by slot", "[pipeline]") {
  const int64_t vocab = 50, slots = 3;
  at::manual_seed(11);
  const at::Tensor logits = (at::randn({2, slots, vocab}) * 3).contiguous();  // [cond / uncond, W, V]
  std::vector<SlotConstraint> constraints(static_cast<size_t>(slots));
  std::vector<std::vector<bool>> allowed(static_cast<size_t>(slots), std::vector<bool>(vocab, true));
  // Slot 1 may use only every third token, slot 2 all but the ten best conditional ones.
  constraints[1].allowed = at::zeros({vocab}, at::kBool);
  const at::Tensor best = std::get<1>(logits[0][2].topk(10));
  constraints[2].allowed = at::ones({vocab}, at::kBool);
  for (int64_t v = 0; v < vocab; ++v) {
    allowed[1][v] = v % 3 == 0;
    constraints[1].allowed[v] = static_cast<bool>(allowed[1][v]);
  }
  for (int64_t i = 0; i < 10; ++i) {
    const int64_t v = best[i].item<int64_t>();
    allowed[2][v] = false;
    constraints[2].allowed[v] = false;
  }
  for (const CfgMix mix : {CfgMix::kLogits, CfgMix::kLogProbs}) {
    for (const double cfg : {1.0, 3.0}) {
      for (const int64_t top_k : {int64_t{5}, int64_t{12}, int64_t{0}}) {
        PipelineSettings s;
        s.cfg_mix = mix;
        s.cfg_scale = cfg;
        s.temperature = 0.7;
        s.top_k = top_k;
        INFO("mix " << static_cast<int>(mix) << ", cfg " << cfg << ", top-k " << top_k);
        const at::Tensor p = run_logits_pipeline(logits, constraints, s);
        for (int64_t slot = 0; slot < slots; ++slot) {
          INFO("slot " << slot);
          std::vector<double> cond(vocab), uncond(vocab);
          for (int64_t v = 0; v < vocab; ++v) {
            cond[v] = logits[0][slot][v].item<float>();
            uncond[v] = logits[1][slot][v].item<float>();
          }
          PipelineSettings whole = s;
          if (whole.top_k == 0) whole.top_k = vocab;
          const std::vector<double> expected = expected_slot(cond, uncond, allowed[slot], whole);
          for (int64_t v = 0; v < vocab; ++v) {
            INFO("token " << v);
            CHECK(p[slot][v].item<float>() == Approx(expected[v]).margin(1e-6).epsilon(1e-4));
          }
        }
      }
    }
  }
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
