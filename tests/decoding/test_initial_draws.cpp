// The draft book's initial drafts in two halves (plan_fill, then finish_fill with the
// tokens of sampling::sample_each), which lets a batch draw every sequence's initial
// drafts from a stale p at once: the plan must name exactly the draws fill() would
// make, on the same streams, and finish_fill must build the drafts from the tokens it
// is given. tests/cuda holds the device draws of sample_each to the CPU's.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "decoding/draft_book.h"
#include "sampling/tensor_draws.h"

using namespace sjd;

namespace {

constexpr int64_t kVocab = 10;
constexpr uint64_t kSeed = 31;
constexpr uint32_t kSequence = 4;

// A 3 x 4 grid of image codes, nothing forced.
family::TokenLayout grid_layout() { return family::TokenLayout(kVocab, std::vector<int64_t>(12, -1), 3, 4, 0, kVocab); }

decoding::MethodConfig sjd_with(const std::string& init) {
  decoding::MethodConfig method = decoding::make_method("sjd");
  method.init = decoding::parse_init_scheme(init);
  return method;
}

at::Tensor distribution(int64_t seed) {
  at::manual_seed(seed);
  return at::softmax(at::randn({kVocab}), -1).contiguous();
}

}  // namespace

TEST_CASE("sample-up's initial draws are planned from the stale p's and built from the given tokens",
          "[decoding][init]") {
  const family::TokenLayout layout = grid_layout();
  const decoding::MethodConfig method = sjd_with("sample-up");
  decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
  // Positions 0..3 (the first grid row) had their p computed; 4..7 are new drafts whose up
  // neighbours are those; position 8's neighbour (4) has no p yet: a uniform draw.
  for (int64_t position = 0; position < 4; ++position) book.remember_p(position, distribution(position));
  const std::vector<int64_t> committed = {1, 2, 3, 4};
  const uint32_t step = 5;
  const std::vector<sampling::RowDraw> draws = book.plan_fill(committed, 5, step);
  REQUIRE(draws.size() == 4);
  for (size_t i = 0; i < draws.size(); ++i) {
    INFO("draw " << i);
    CHECK(at::equal(draws[i].q, book.stale_p().at(static_cast<int64_t>(i))));
    CHECK(draws[i].key.position == 4 + i);
    CHECK(draws[i].key.step == step);
    CHECK(draws[i].key.purpose == sampling::Purpose::kInit);
    CHECK(draws[i].key.sequence == kSequence);
  }
  // finish_fill builds the drafts from the tokens it is handed, not from draws of its own.
  book.finish_fill(committed, {9, 8, 7, 6});
  REQUIRE(book.drafts().size() == 5);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(book.drafts()[i].token == static_cast<int64_t>(9 - i));
    CHECK(at::equal(book.drafts()[i].q, book.stale_p().at(static_cast<int64_t>(i))));
  }
  CHECK(book.drafts()[4].q.sum().item<float>() == Approx(1.0f));  // the uniform q, drawn on its own

  // The same book state through fill() gives what plan -> sample_each -> finish gives.
  decoding::DraftBook whole(layout, method, decoding::Mutants{}, kSeed, kSequence);
  decoding::DraftBook halves(layout, method, decoding::Mutants{}, kSeed, kSequence);
  for (int64_t position = 0; position < 4; ++position) {
    whole.remember_p(position, distribution(position));
    halves.remember_p(position, distribution(position));
  }
  whole.fill(committed, 5, step);
  halves.finish_fill(committed, sampling::sample_each(halves.plan_fill(committed, 5, step)));
  for (size_t i = 0; i < 5; ++i) {
    INFO("draft " << i);
    CHECK(halves.drafts()[i].token == whole.drafts()[i].token);
    CHECK(at::equal(halves.drafts()[i].q, whole.drafts()[i].q));
    if (i < 4) CHECK(whole.drafts()[i].token == sampling::sample_from(whole.stale_p().at(static_cast<int64_t>(i)),
                                                                      sampling::make_key(kSeed, kSequence, step,
                                                                                         4 + static_cast<int64_t>(i),
                                                                                         sampling::Purpose::kInit)));
  }
}

TEST_CASE("schemes that draw from no stale p plan no draws", "[decoding][init]") {
  const family::TokenLayout layout = grid_layout();
  for (const std::string init : {"random", "repeat-left", "repeat-up"}) {
    INFO(init);
    const decoding::MethodConfig method = sjd_with(init);
    decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
    for (int64_t position = 0; position < 4; ++position) book.remember_p(position, distribution(position));
    CHECK(book.plan_fill({1, 2, 3, 4}, 6, 0).empty());
    book.finish_fill({1, 2, 3, 4}, {});
    CHECK(book.drafts().size() == 6);
  }
}

TEST_CASE("finish_fill refuses tokens that do not match its plan", "[decoding][init]") {
  const family::TokenLayout layout = grid_layout();
  const decoding::MethodConfig method = sjd_with("sample-left");
  decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
  CHECK_THROWS_WITH(book.finish_fill({}, {}), Catch::Contains("no plan"));
  book.remember_p(0, distribution(0));
  REQUIRE(book.plan_fill({5}, 2, 1).size() == 1);  // position 1's left neighbour, 0, has a p
  CHECK_THROWS_WITH(book.finish_fill({5}, {1, 2}), Catch::Contains("2 draws for 1 planned"));
}

TEST_CASE("sample_each draws every row on its own stream, as sample_from", "[sampling][init]") {
  std::vector<sampling::RowDraw> draws;
  for (uint32_t i = 0; i < 6; ++i) {
    draws.push_back({distribution(40 + i), sampling::make_key(kSeed, i % 2, 3 + i, 20 + i,
                                                              i % 3 == 0 ? sampling::Purpose::kGumbel
                                                                         : sampling::Purpose::kInit)});
  }
  const std::vector<int64_t> drawn = sampling::sample_each(draws);
  REQUIRE(drawn.size() == draws.size());
  for (size_t i = 0; i < draws.size(); ++i) CHECK(drawn[i] == sampling::sample_from(draws[i].q, draws[i].key));
  CHECK(sampling::sample_each({}).empty());
  draws[2].q = at::zeros({kVocab});  // no positive mass: the same error as sample_token's
  CHECK_THROWS_WITH(sampling::sample_each(draws), Catch::Contains("no token has a positive probability"));
  draws[2].q = at::empty({kVocab}, at::TensorOptions().device(at::kMeta));
  CHECK_THROWS_WITH(sampling::sample_each(draws), Catch::Contains("every q must be on the first one's device"));
}
