// The fused logits pipeline kernel against sampling::run_logits_pipeline on
// the same logits and constraints. Stated tolerance: every probability within
// 1e-4 relative + 1e-7 absolute of the CPU's (softmax sums are reduced in a
// different order), the same set of tokens kept (mask and top-k select exactly
// the same tokens; see same_support), and identical greedy point masses.
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "device_cases.h"
#include "sampling/cuda_ops.h"
#include "sampling/logits_pipeline.h"

using namespace sjd;

namespace {

// The first and last slots forced; the others in turn free, masked to an "image token" range, and
// masked by a second tensor (even ids from 8, stored as uint8 2: any nonzero value allows, as on the
// CPU), so the kernels see two mask rows.
std::vector<sampling::SlotConstraint> mixed_constraints(int slots, int64_t vocab) {
  at::Tensor image = at::zeros({vocab}, at::kBool);
  image.narrow(0, 4, vocab - 40).fill_(true);
  const at::Tensor ids = at::arange(vocab);
  const at::Tensor even = (ids.remainder(2).eq(0).logical_and(ids.ge(8))).to(at::kByte) * 2;
  std::vector<sampling::SlotConstraint> out;
  for (int s = 0; s < slots; ++s) {
    sampling::SlotConstraint c;
    if (s == 0 || s == slots - 1) {
      c.forced = s == 0 ? 2 : vocab - 3;
    } else if (s % 3 != 0) {
      c.allowed = s % 3 == 1 ? image : even;
    }
    out.push_back(c);
  }
  return out;
}

// Mask and top-k keep the same tokens on both sides. A kept token whose probability
// underflows to 0 on one side only (log-prob CFG puts many near 2^-150) is no disagreement:
// only a probability above 1e-30 on one side must be positive on the other.
bool same_support(const at::Tensor& got, const at::Tensor& expected) {
  const bool got_misses = at::logical_and(expected > 1e-30, got == 0).any().item<bool>();
  const bool got_adds = at::logical_and(got > 1e-30, expected == 0).any().item<bool>();
  return !got_misses && !got_adds;
}

sampling::PipelineSettings settings_of(sampling::CfgMix mix, double cfg, double temperature, int64_t top_k) {
  sampling::PipelineSettings settings;
  settings.cfg_mix = mix;
  settings.cfg_scale = cfg;
  settings.temperature = temperature;
  settings.top_k = top_k;
  return settings;
}

}  // namespace

TEST_CASE("fused logits pipeline matches the CPU pipeline (CFG, constraints, temperature, top-k)", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const int slots = 17;
  for (int64_t vocab : {int64_t{1000}, int64_t{65536}}) {
    const at::Tensor logits =
        at::randn({2, slots, vocab}, at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(vocab))) * 4.0;
    const auto constraints = mixed_constraints(slots, vocab);
    const auto on_device = sampling::cuda::upload_constraints(constraints, vocab, device);
    for (auto mix : {sampling::CfgMix::kLogits, sampling::CfgMix::kLogProbs}) {
      for (double cfg : {1.0, 3.0}) {
        for (double temperature : {0.0, 0.7, 1.0}) {
          for (int64_t top_k : {int64_t{0}, int64_t{1}, int64_t{50}, int64_t{2000}}) {
            const sampling::PipelineSettings settings = settings_of(mix, cfg, temperature, top_k);
            INFO("vocab " << vocab << " log-prob mix " << (mix == sampling::CfgMix::kLogProbs) << " cfg " << cfg
                          << " T " << temperature << " top-k " << top_k);
            const at::Tensor expected = sampling::run_logits_pipeline(logits, constraints, settings);
            const at::Tensor got =
                sampling::cuda::run_logits_pipeline(logits.to(device), on_device, settings).to(at::kCPU);
            REQUIRE(got.sizes() == expected.sizes());
            CHECK(same_support(got, expected));
            const at::Tensor error = (got - expected).abs();
            const at::Tensor allowed = expected.abs() * 1e-4 + 1e-7;
            INFO("largest error " << error.max().item<float>());
            CHECK((error <= allowed).all().item<bool>());
            if (temperature == 0.0) CHECK(at::equal(got, expected));
          }
        }
      }
    }
  }
}

TEST_CASE("fused greedy pipeline gives no mass to a slot whose largest logit is not finite, as the CPU does",
          "[cuda]") {
  const at::Device device = cuda_testing::device();
  // Slots: plain; a NaN (first, then last in the row: the kernel's argmax skips a NaN unless it comes
  // first); +inf; every token masked. Under CFG a NaN of the unconditional row alone spoils the mix.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t vocab = 5000;
  at::Tensor logits = at::randn({2, 5, vocab}, at::make_generator<at::CPUGeneratorImpl>(11));
  logits[0][1][0] = nan;
  logits[1][2][vocab - 1] = nan;
  logits[0][3][17] = inf;
  std::vector<sampling::SlotConstraint> constraints(5);
  constraints[4].allowed = at::zeros({vocab}, at::kBool);
  const auto on_device = sampling::cuda::upload_constraints(constraints, vocab, device);
  sampling::PipelineSettings greedy;
  greedy.temperature = 0.0;
  greedy.cfg_scale = 3.0;
  const at::Tensor expected = sampling::run_logits_pipeline(logits, constraints, greedy);
  const at::Tensor got = sampling::cuda::run_logits_pipeline(logits.to(device), on_device, greedy).to(at::kCPU);
  CHECK(at::equal(got, expected));
  CHECK(expected[0].sum().item<float>() == 1.0f);
  CHECK(expected.narrow(0, 1, 4).sum().item<float>() == 0.0f);
}

TEST_CASE("fused pipeline keeps ties at the k-th value, as the CPU does", "[cuda]") {
  const at::Device device = cuda_testing::device();
  // Values repeat, so the k-th largest has ties that top-k must all keep.
  at::Tensor logits = at::floor(at::randn({1, 3, 4096}, at::make_generator<at::CPUGeneratorImpl>(3)) * 4.0);
  const std::vector<sampling::SlotConstraint> constraints(3);
  const auto on_device = sampling::cuda::upload_constraints(constraints, 4096, device);
  for (int64_t top_k : {int64_t{7}, int64_t{100}, int64_t{4095}}) {
    sampling::PipelineSettings settings;
    settings.top_k = top_k;
    const at::Tensor expected = sampling::run_logits_pipeline(logits, constraints, settings);
    const at::Tensor got = sampling::cuda::run_logits_pipeline(logits.to(device), on_device, settings).to(at::kCPU);
    CHECK(same_support(got, expected));
    CHECK(((got - expected).abs() <= expected * 1e-4 + 1e-7).all().item<bool>());
  }
}

TEST_CASE("a slot mask is uploaded once per host tensor, and another tensor gets its own copy", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const int64_t vocab = 300;
  const auto constraints = mixed_constraints(6, vocab);  // slots 1 and 4 share one mask tensor, slot 2 has another
  const auto first = sampling::cuda::upload_constraints(constraints, vocab, device);
  const auto again = sampling::cuda::upload_constraints(constraints, vocab, device);
  REQUIRE(first.masks.size(0) == 2);
  CHECK(at::equal(again.masks.to(at::kCPU), first.masks.to(at::kCPU)));
  CHECK(at::equal(first.masks[0].to(at::kCPU), constraints[1].allowed.to(at::kByte)));
  // The uint8 mask's 2s go up as 1s (allowed), as the CPU reads any nonzero value.
  CHECK(at::equal(first.masks[1].to(at::kCPU), constraints[2].allowed.to(at::kBool).to(at::kByte)));
  CHECK(at::equal(first.mask_of_slot.to(at::kCPU), at::tensor({-1, 0, 1, -1, 0, -1}, at::kInt)));
  // Another mask tensor with other values (a second layout): its own copy, never the first's.
  std::vector<sampling::SlotConstraint> other = constraints;
  const at::Tensor odd = at::arange(vocab).remainder(2).to(at::kBool);
  for (auto& c : other) {
    if (c.allowed.defined()) c.allowed = odd;
  }
  const auto second = sampling::cuda::upload_constraints(other, vocab, device);
  REQUIRE(second.masks.size(0) == 1);
  CHECK(at::equal(second.masks[0].to(at::kCPU), odd.to(at::kByte)));
  const at::Tensor mask_of_slot = second.mask_of_slot.to(at::kCPU);
  CHECK(mask_of_slot[1].item<int>() == 0);
  CHECK(mask_of_slot[3].item<int>() == -1);
}

TEST_CASE("the pipeline on a restricted head's columns gives the whole width's probabilities", "[cuda][columns]") {
  // The model's logits outside its head's columns are the lowest float (Transformer::restrict_outputs):
  // they get probability 0 whatever the settings, so the kernel on the columns alone, put back among
  // zeros, must give what the reference gives on the whole width.
  const at::Device device = cuda_testing::device();
  const int slots = 9;
  const int64_t vocab = 4096;
  std::vector<int64_t> columns;
  for (int64_t id = 0; id < vocab; ++id) {
    if (id % 4 == 0 || id == 2 || id == vocab - 3) columns.push_back(id);  // both forced tokens among them
  }
  const at::Tensor in_head = at::zeros({vocab}, at::kBool).index_fill_(0, at::tensor(columns, at::kLong), true);
  const at::Tensor logits = (at::randn({2, slots, vocab}, at::make_generator<at::CPUGeneratorImpl>(31)) * 4.0)
                                .masked_fill(~in_head, std::numeric_limits<float>::lowest());
  std::vector<sampling::SlotConstraint> constraints = mixed_constraints(slots, vocab);
  constraints[slots - 2] = {1, {}};  // forced outside the columns, as a window's slots past the image's end are
  const char* columns_setting = std::getenv("SJD_PIPELINE_COLUMNS");
  const bool columns_off = columns_setting != nullptr && std::string(columns_setting) == "0";
  for (auto mix : {sampling::CfgMix::kLogits, sampling::CfgMix::kLogProbs}) {
    for (double cfg : {1.0, 3.0}) {
      for (double temperature : {0.0, 0.7, 1.0, 1.5}) {
        for (int64_t top_k : {int64_t{0}, int64_t{1}, int64_t{50}, int64_t{2000}}) {
          const sampling::PipelineSettings settings = settings_of(mix, cfg, temperature, top_k);
          INFO("log-prob mix " << (mix == sampling::CfgMix::kLogProbs) << " cfg " << cfg << " T " << temperature
                               << " top-k " << top_k);
          const at::Tensor expected = sampling::run_logits_pipeline(logits, constraints, settings);
          const at::Tensor on_columns =
              sampling::cuda::run_logits_pipeline_on_columns(logits.to(device), constraints, settings, columns);
          REQUIRE(on_columns.defined());
          const at::Tensor got = on_columns.to(at::kCPU);
          REQUIRE(got.sizes() == expected.sizes());
          CHECK(same_support(got, expected));
          CHECK(((got - expected).abs() <= expected.abs() * 1e-4 + 1e-7).all().item<bool>());
          // Outside the columns only the forced slot's point mass.
          const at::Tensor outside = got.masked_select(~in_head.unsqueeze(0).expand_as(got));
          CHECK(outside.sum().item<float>() == 1.0f);
          CHECK(got[slots - 2][1].item<float>() == 1.0f);
          if (temperature == 0.0) CHECK(at::equal(got, expected));
          // The dispatcher takes the same path when given the columns (unless SJD_PIPELINE_COLUMNS=0 turns it off).
          if (!columns_off) {
            const at::Tensor dispatched =
                sampling::run_logits_pipeline(logits.to(device), constraints, settings, columns).to(at::kCPU);
            CHECK(at::equal(dispatched, got));
          }
        }
      }
    }
  }
  // A mask that allows none of the columns, or columns that are not ascending ids: the whole width decides.
  sampling::PipelineSettings settings;
  std::vector<sampling::SlotConstraint> no_column = constraints;
  const at::Tensor ids = at::arange(vocab);
  no_column[3].allowed = ids.remainder(4).eq(1).logical_and(ids.ne(vocab - 3));
  CHECK_FALSE(
      sampling::cuda::run_logits_pipeline_on_columns(logits.to(device), no_column, settings, columns).defined());
  // The dispatcher then runs the whole-width kernel (the same kernel on the same input: equal, NaN
  // included, which an all-lowest slot may give).
  const at::Tensor fallback = sampling::run_logits_pipeline(logits.to(device), no_column, settings, columns);
  const at::Tensor whole = sampling::cuda::run_logits_pipeline(
      logits.to(device), sampling::cuda::upload_constraints(no_column, vocab, device), settings);
  CHECK(at::equal(fallback.nan_to_num().to(at::kCPU), whole.nan_to_num().to(at::kCPU)));
  std::vector<int64_t> unordered = columns;
  std::swap(unordered[3], unordered[4]);
  CHECK_FALSE(
      sampling::cuda::run_logits_pipeline_on_columns(logits.to(device), constraints, settings, unordered).defined());
}
