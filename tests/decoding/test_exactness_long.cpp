// Exactness over longer sequences than test_exactness.cpp can enumerate: a 4 x 4 grid (20 generated
// tokens), where windows are rejected and continued many times per sequence. The whole-sequence
// distribution has too many outcomes to compare, so each image position's token is compared with
// `ar`'s samples at that position (Pearson's two-sample test on disjoint seed ranges). Positions
// are not independent, so the 16 p-values are judged together by Bonferroni: a correct method must
// keep the smallest above 1e-3 / 16; a broken variant must push it below 1e-6.
#include <catch2/catch.hpp>

#include <algorithm>

#include "decoding/decoder.h"
#include "table_model.h"
#include "testing/statistics.h"

using namespace sjd;
using sjd::testing::TableModel;

namespace {

constexpr int kSide = 4;
constexpr int kRuns = 12000;
constexpr int64_t kCodes = 3;  // image tokens 1..3, as in the small layout

family::TokenLayout grid_layout() {
  std::vector<int64_t> forced;
  for (int row = 0; row < kSide; ++row) {
    forced.insert(forced.end(), kSide, -1);
    forced.push_back(4);  // each row ends with a forced newline, as Lumina-mGPT's do
  }
  return family::TokenLayout(6, forced, kSide, kSide, 1, kCodes);
}

// Every exact method's hardest setting at once: CFG, top-k 2 of the 3 codes, repeat-up drafts.
decoding::DecodeRequest request_for(const std::string& method, int window) {
  return sjd::testing::table_request(method, window, "repeat-up", true, 2);
}

// counts[position][token - 1] over seeds first .. first + kRuns - 1.
std::vector<std::vector<long>> position_counts(const decoding::DecodeRequest& base, uint64_t first,
                                               const decoding::Mutants& mutants = {}) {
  TableModel model({});
  const auto layout = grid_layout();
  std::vector<std::vector<long>> counts(kSide * kSide, std::vector<long>(kCodes, 0));
  auto request = base;
  for (int i = 0; i < kRuns; ++i) {
    request.seed = first + static_cast<uint64_t>(i);
    const auto tokens = decoding::decode(model, layout, request, mutants).tokens;
    for (int64_t t = 0; t < layout.length(); ++t) {
      const int64_t cell = layout.cell(t);
      if (cell >= 0) ++counts[static_cast<size_t>(cell)][static_cast<size_t>(tokens[static_cast<size_t>(t)] - 1)];
    }
  }
  return counts;
}

double smallest_p(const std::vector<std::vector<long>>& reference, const std::vector<std::vector<long>>& method) {
  double smallest = 1.0;
  for (size_t cell = 0; cell < reference.size(); ++cell) {
    smallest = std::min(smallest, sjd::testing::two_sample_p(reference[cell], method[cell]));
  }
  return smallest;
}

}  // namespace

TEST_CASE("over a 4 x 4 grid every lossless method draws each position as ar does", "[exactness]") {
  const auto reference = position_counts(request_for("ar", 0), 0);
  for (const std::string method : {"sjd", "scd-mc", "scd-gs", "sjd-pac"}) {
    const double p = smallest_p(reference, position_counts(request_for(method, 8), 1000000));
    INFO(method << ": smallest p over 16 positions " << p);
    CHECK(p > 1e-3 / (kSide * kSide));
  }
}

TEST_CASE("mutant: over a 4 x 4 grid, scd-mc keeping the stale draft q is rejected", "[exactness][mutant]") {
  const auto reference = position_counts(request_for("ar", 0), 0);
  decoding::Mutants stale;
  stale.stale_q = true;
  const double p = smallest_p(reference, position_counts(request_for("scd-mc", 8), 1000000, stale));
  INFO("smallest p over 16 positions " << p);
  CHECK(p < 1e-6);
}
