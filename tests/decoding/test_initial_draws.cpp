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
    CHECK(draws[i].key.seed == kSeed);
  }
  // finish_fill builds the drafts from the tokens it is handed, not from draws of its own.
  book.finish_fill(committed, {9, 8, 7, 6});
  REQUIRE(book.drafts().size() == 5);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(book.drafts()[i].token == static_cast<int64_t>(9 - i));
    CHECK(at::equal(book.drafts()[i].q, book.stale_p().at(static_cast<int64_t>(i))));
  }
  // Position 8 is drawn uniformly over the image codes on its own kInit stream.
  const at::Tensor uniform = at::full({kVocab}, 1.0f / kVocab);
  CHECK(at::allclose(book.drafts()[4].q, uniform));
  CHECK(book.drafts()[4].token ==
        sampling::sample_from(uniform, sampling::make_key(kSeed, kSequence, step, 8, sampling::Purpose::kInit)));

  // fill() draws the planned ones itself: sample_from of each stale p on its kInit stream.
  decoding::DraftBook whole(layout, method, decoding::Mutants{}, kSeed, kSequence);
  for (int64_t position = 0; position < 4; ++position) whole.remember_p(position, distribution(position));
  whole.fill(committed, 5, step);
  for (size_t i = 0; i < 4; ++i) {
    INFO("draft " << i);
    const auto key = sampling::make_key(kSeed, kSequence, step, 4 + static_cast<int64_t>(i), sampling::Purpose::kInit);
    CHECK(whole.drafts()[i].token == sampling::sample_from(whole.stale_p().at(static_cast<int64_t>(i)), key));
  }
}

namespace {

// Two grid rows of four image codes (ids 1..3), each ended by the forced newline 4.
family::TokenLayout layout_with_newlines() {
  std::vector<int64_t> forced;
  for (int r = 0; r < 2; ++r) forced.insert(forced.end(), {-1, -1, -1, -1, 4});
  return family::TokenLayout(6, forced, 2, 4, 1, 3);
}

at::Tensor code_distribution(int64_t seed) {
  at::manual_seed(seed);
  at::Tensor p = at::zeros({6});
  p.narrow(0, 1, 3).copy_(at::softmax(at::randn({3}), -1));
  return p;
}

}  // namespace

TEST_CASE("initial draws skip forced positions, sample-left falls back to the code above, scd-gs keys them at step 0",
          "[decoding][init]") {
  const family::TokenLayout layout = layout_with_newlines();
  const std::vector<int64_t> committed = {1, 2, 3, 1, 4};  // the first grid row and its newline
  const uint32_t step = 7;
  SECTION("sample-up: the second row's codes are drawn after the first's, its newline is forced") {
    const decoding::MethodConfig method = sjd_with("sample-up");
    decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
    for (int64_t position = 0; position < 5; ++position) book.remember_p(position, code_distribution(position));
    const std::vector<sampling::RowDraw> draws = book.plan_fill(committed, 5, step);
    REQUIRE(draws.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(draws[i].key.position == 5 + i);
      CHECK(at::equal(draws[i].q, book.stale_p().at(static_cast<int64_t>(i))));
    }
    book.finish_fill(committed, {3, 3, 2, 1});
    CHECK(book.drafts()[3].token == 1);
    CHECK(book.drafts()[4].token == 4);  // the newline, drafted as itself with a point mass
    CHECK(book.drafts()[4].q[4].item<float>() == 1.0f);
  }
  SECTION("scd-gs with sample-left: the first column draws after the code above, keyed without the step") {
    decoding::MethodConfig method = decoding::make_method("scd-gs");
    method.init = decoding::InitScheme::kSampleLeft;
    decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
    for (int64_t position = 0; position < 5; ++position) book.remember_p(position, code_distribution(position));
    // Position 5 (first column) has no left neighbour: the code above, 0. Positions 6..8 have
    // left neighbours without a p (new drafts): uniform draws. 9 is forced.
    const std::vector<sampling::RowDraw> draws = book.plan_fill(committed, 5, step);
    REQUIRE(draws.size() == 1);
    CHECK(draws[0].key.position == 5);
    CHECK(draws[0].key.purpose == sampling::Purpose::kGumbel);
    CHECK(draws[0].key.step == 0);
    CHECK(at::equal(draws[0].q, book.stale_p().at(0)));
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
