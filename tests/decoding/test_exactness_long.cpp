// Exactness over longer sequences than test_exactness.cpp can sample whole: square grids of image
// tokens (4 x 4: 20 generated tokens), where windows are rejected and continued many times per
// sequence. The exact law of the whole sequence is enumerated from the table model (top-k 2 leaves
// 2^16 sequences on the 4 x 4 grid; with all three codes open the grid is 3 x 3, 3^9 sequences), but
// 12000 samples cannot fill that many outcomes, so its low-order margins are tested instead: each
// image position's token, and the joint token pair of each two neighbouring positions (across and
// down), which a method that kept the margins but broke the dependence between positions would
// move. Each margin is Pearson's test against its exact law; the p-values are not independent, so
// they are judged together by Bonferroni: a correct method must keep the smallest above 1e-3 / tests;
// a broken variant must push it below 1e-6. The 4 x 4 case holds five methods to that, so a correct
// build would fail it with probability at most 5e-3 (the seeds are fixed: a given build always passes
// or always fails).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "decoding/decoder.h"
#include "table_model.h"
#include "testing/statistics.h"

using namespace sjd;
using sjd::testing::TableModel;

namespace {

constexpr int kRuns = 12000;
constexpr int64_t kCodes = 3;  // image tokens 1..3, as in the small layout

family::TokenLayout grid_layout(int side) {
  std::vector<int64_t> forced;
  for (int row = 0; row < side; ++row) {
    forced.insert(forced.end(), side, -1);
    forced.push_back(4);  // each row ends with a forced newline, as Lumina-mGPT's do
  }
  return family::TokenLayout(6, forced, side, side, 1, kCodes);
}

// CFG and repeat-up drafts, every exact method's hardest setting; top-k 2 keeps two of the 3 codes.
decoding::DecodeRequest request_for(const std::string& method, int window, int64_t top_k = 2) {
  return sjd::testing::table_request(method, window, "repeat-up", true, top_k);
}

// The margins tested: each cell alone, and each cell with its right and its lower neighbour.
// An outcome is the cell's code (0-based), or a * kCodes + b for a pair.
std::vector<std::vector<int>> margins(int side) {
  std::vector<std::vector<int>> out;
  for (int cell = 0; cell < side * side; ++cell) out.push_back({cell});
  for (int cell = 0; cell < side * side; ++cell) {
    if (cell % side + 1 < side) out.push_back({cell, cell + 1});
    if (cell + side < side * side) out.push_back({cell, cell + side});
  }
  return out;
}

int outcome(const std::vector<int>& margin, const std::vector<int64_t>& codes) {
  int value = 0;
  for (const int cell : margin) value = value * static_cast<int>(kCodes) + static_cast<int>(codes[static_cast<size_t>(cell)]);
  return value;
}

// Codes (0-based) by cell of a generated sequence.
std::vector<int64_t> codes_of(const family::TokenLayout& layout, const std::vector<int64_t>& tokens) {
  std::vector<int64_t> codes(static_cast<size_t>(layout.grid_height() * layout.grid_width()));
  for (int64_t t = 0; t < layout.length(); ++t) {
    const int64_t cell = layout.cell(t);
    if (cell >= 0) codes[static_cast<size_t>(cell)] = tokens[static_cast<size_t>(t)] - 1;
  }
  return codes;
}

using Law = std::vector<std::map<int, double>>;  // by margin: outcome -> probability
using Counts = std::vector<std::map<int, long>>;  // by margin: outcome -> samples

// The exact law of every margin, from the enumerated law of whole sequences.
Law exact_margins(int side, const decoding::DecodeRequest& request) {
  TableModel model({});
  const auto layout = grid_layout(side);
  const auto tested = margins(side);
  Law law(tested.size());
  const auto sequences = sjd::testing::exact_distribution(model, layout, request.pipeline,
                                                          static_cast<int64_t>(request.rows.size()));
  for (const auto& [tokens, mass] : sequences) {
    const auto codes = codes_of(layout, tokens);
    for (size_t m = 0; m < tested.size(); ++m) law[m][outcome(tested[m], codes)] += mass;
  }
  return law;
}

Counts sampled_margins(int side, const decoding::DecodeRequest& base, const decoding::Mutants& mutants = {}) {
  TableModel model({});
  const auto layout = grid_layout(side);
  const auto tested = margins(side);
  Counts counts(tested.size());
  auto request = base;
  for (int i = 0; i < kRuns; ++i) {
    request.seed = 1000000 + static_cast<uint64_t>(i);
    const auto codes = codes_of(layout, decoding::decode(model, layout, request, mutants).tokens);
    for (size_t m = 0; m < tested.size(); ++m) ++counts[m][outcome(tested[m], codes)];
  }
  return counts;
}

double smallest_p(const Law& law, const Counts& counts) {
  double smallest = 1.0;
  for (size_t m = 0; m < law.size(); ++m) {
    smallest = std::min(smallest, sjd::testing::chi_square_fit(law[m], counts[m]).p_value);
  }
  return smallest;
}

}  // namespace

TEST_CASE("over a 4 x 4 grid every lossless method draws each position and neighbour pair exactly",
          "[exactness]") {
  constexpr int kSide = 4;
  const Law law = exact_margins(kSide, request_for("ar", 0));
  const double tests = static_cast<double>(law.size());  // 16 cells, 24 neighbour pairs
  for (const std::string method : {"ar", "sjd", "scd-mc", "scd-gs", "sjd-pac"}) {
    const double p = smallest_p(law, sampled_margins(kSide, request_for(method, method == "ar" ? 0 : 8)));
    INFO(method << ": smallest p over " << tests << " margins " << p);
    CHECK(p > 1e-3 / tests);
  }
}

TEST_CASE("over a 3 x 3 grid with every code open sjd-pac's trees draw exactly", "[exactness]") {
  // Top-k 2 leaves a tree level at most one sibling to try after the first; here three can be tried.
  constexpr int kSide = 3;
  const Law law = exact_margins(kSide, request_for("ar", 0, 0));
  const double tests = static_cast<double>(law.size());  // 9 cells, 12 neighbour pairs
  auto tree = request_for("sjd-pac", 8, 0);
  tree.method.pd_k = 3;
  tree.method.pd_depth = 2;
  const double p = smallest_p(law, sampled_margins(kSide, tree));
  INFO("smallest p over " << tests << " margins " << p);
  CHECK(p > 1e-3 / tests);
}

TEST_CASE("mutant: over a 4 x 4 grid, scd-mc keeping the stale draft q is rejected", "[exactness][mutant]") {
  const Law law = exact_margins(4, request_for("ar", 0));
  decoding::Mutants stale;
  stale.stale_q = true;
  const double p = smallest_p(law, sampled_margins(4, request_for("scd-mc", 8), stale));
  INFO("smallest p " << p);
  CHECK(p < 1e-6);
}

TEST_CASE("mutant: over a 3 x 3 grid, sjd-pac keeping the longest accepted sibling is rejected",
          "[exactness][mutant]") {
  const Law law = exact_margins(3, request_for("ar", 0, 0));
  auto tree = request_for("sjd-pac", 8, 0);
  tree.method.pd_k = 3;
  tree.method.pd_depth = 2;
  decoding::Mutants longest;
  longest.longest_sibling = true;
  const double p = smallest_p(law, sampled_margins(3, tree, longest));
  INFO("smallest p " << p);
  CHECK(p < 1e-6);
}
