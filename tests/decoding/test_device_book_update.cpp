// The draft-book side of the device verifier, on the CPU: given what the kernels
// commit (here: what WindowVerifier committed), adopt_window_result must leave the
// book as WindowVerifier::verify leaves it -- the same next drafts with the same
// q's and ages, and the same stale p's, which sample-left/up initial drafts and
// SJD-PAC's candidate draws read in later windows. tests/cuda holds the kernels
// themselves to WindowVerifier.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "decoding/device_verifier.h"
#include "decoding/window_verifier.h"

using namespace sjd;

namespace {

constexpr uint64_t kSeed = 77;
constexpr uint32_t kSequence = 2;

// Probabilities [slots, V]; on odd steps most slots put most of their mass on the token
// drafted after them, so accepted runs of every length happen, and drafts that survive
// several windows (ages above 1), as well as early rejections.
at::Tensor window_probs(const model::DraftTree& nodes, int64_t vocab, uint32_t step) {
  at::manual_seed(900 + step);
  const int64_t slots = 1 + static_cast<int64_t>(nodes.size());
  at::Tensor p = at::softmax(2.0 * at::randn({slots, vocab}), -1);
  if (step % 2 == 1) {
    for (int64_t s = 0; s < slots; ++s) {
      if ((s + step / 2) % 4 == 3) continue;
      const int64_t peak = s < static_cast<int64_t>(nodes.size()) ? nodes.tokens[static_cast<size_t>(s)] : 0;
      p[s].mul_(0.2);
      p[s][peak] += 0.8f;
    }
  }
  return p.contiguous();
}

void require_same_book(const decoding::DraftBook& expected, const decoding::DraftBook& got) {
  REQUIRE(got.drafts().size() == expected.drafts().size());
  for (size_t i = 0; i < expected.drafts().size(); ++i) {
    INFO("draft " << i);
    CHECK(got.drafts()[i].token == expected.drafts()[i].token);
    CHECK(got.drafts()[i].age == expected.drafts()[i].age);
    CHECK(at::equal(got.drafts()[i].q, expected.drafts()[i].q));
  }
  REQUIRE(got.tree().size() == expected.tree().size());
  for (size_t d = 0; d < expected.tree().size(); ++d) {
    CHECK(got.tree()[d].candidates == expected.tree()[d].candidates);
    CHECK(at::equal(got.tree()[d].q, expected.tree()[d].q));
  }
  REQUIRE(got.stale_p().size() == expected.stale_p().size());
  for (const auto& [position, p] : expected.stale_p()) {
    INFO("stale p of position " << position);
    REQUIRE(got.stale_p().count(position) == 1);
    CHECK(at::equal(got.stale_p().at(position), p));
  }
}

// Every few tree windows the root's p favours the first level's second candidate, so
// off-spine paths get accepted (their slots' p's are then the ones remembered).
void favour_sibling(at::Tensor& probs, const decoding::DraftBook& book, uint32_t step) {
  if (book.tree().empty() || book.tree()[0].candidates.size() < 2 || step % 3 != 0) return;
  probs[0].mul_(0.1);
  probs[0][book.tree()[0].candidates[1]] += 0.9f;
}

}  // namespace

TEST_CASE("the device verifier's book update leaves the draft book as WindowVerifier does", "[decoding][device]") {
  const int64_t vocab = 40, rows = 6, cols = 8;
  const family::TokenLayout layout(vocab, std::vector<int64_t>(static_cast<size_t>(rows * cols), -1), rows, cols, 0,
                                   vocab);
  struct Variant {
    std::string method;
    decoding::InitScheme init;
  };
  for (const Variant& v : std::vector<Variant>{{"sjd", decoding::InitScheme::kRandom},
                                               {"sjd", decoding::InitScheme::kSampleUp},
                                               {"scd-mc", decoding::InitScheme::kRepeatUp},
                                               {"scd-gs", decoding::InitScheme::kRandom},
                                               {"jacobi", decoding::InitScheme::kRandom},
                                               {"sjd-pac", decoding::InitScheme::kSampleLeft}}) {
    decoding::MethodConfig method = decoding::make_method(v.method);
    method.init = v.init;
    method.window = 7;
    method.pd_k = 3;
    method.pd_depth = 2;
    decoding::DraftBook cpu_book(layout, method, decoding::Mutants{}, kSeed, kSequence);
    decoding::DraftBook adopted(layout, method, decoding::Mutants{}, kSeed, kSequence);
    const decoding::WindowVerifier verifier(method, decoding::Mutants{}, kSeed, kSequence);
    std::vector<int64_t> committed;
    int rejections = 0, oldest = 0, sibling_accepts = 0;
    for (uint32_t step = 0; static_cast<int64_t>(committed.size()) < layout.length(); ++step) {
      INFO(method.describe() << ", step " << step);
      const int64_t first = static_cast<int64_t>(committed.size());
      const int chain = static_cast<int>(std::min<int64_t>(method.window, layout.length() - first));
      cpu_book.fill(committed, chain, step);
      adopted.fill(committed, chain, step);
      require_same_book(cpu_book, adopted);  // initial drafts read the stale p's each book kept
      model::DraftTree nodes;
      std::vector<std::vector<int>> child_of;
      decoding::build_window(cpu_book, chain, nodes, child_of);

      at::Tensor probs = window_probs(nodes, vocab, step);
      favour_sibling(probs, cpu_book, step);
      const decoding::WindowInput input{first, layout.length(), chain, &nodes, &child_of, probs, step};
      const decoding::WindowOutcome expected = verifier.verify(input, cpu_book);
      sampling::cuda::WindowResult kernels;  // what verify_window reads back
      kernels.tokens = expected.tokens;
      kernels.path = expected.path;
      kernels.rejected = expected.rejected;
      kernels.sibling_accepts = expected.sibling_accepts;
      for (const auto& draft : cpu_book.drafts()) kernels.next_drafts.push_back(draft.token);
      // The kernels' tokens, path and next drafts are taken as they are (tests_cuda compares them with the
      // CPU's); what is checked is what adopting them computes: the window kind and the books' q's, ages,
      // tree and stale p's.
      const decoding::WindowOutcome got = decoding::adopt_window_result(input, kernels, adopted);
      CHECK(got.tree_window == expected.tree_window);
      require_same_book(cpu_book, adopted);

      committed.insert(committed.end(), expected.tokens.begin(), expected.tokens.end());
      rejections += expected.rejected ? 1 : 0;
      sibling_accepts += expected.sibling_accepts;
      for (const auto& draft : cpu_book.drafts()) oldest = std::max(oldest, draft.age);
      if (method.proactive_tree && expected.rejected) {  // the next window's tree, drawn from the books' q's
        cpu_book.grow_tree(method.pd_k, method.pd_depth, step);
        adopted.grow_tree(method.pd_k, method.pd_depth, step);
      }
    }
    CHECK(rejections > 0);
    CHECK(oldest > 1);
    if (method.proactive_tree) CHECK(sibling_accepts > 0);  // tree windows with off-spine paths were verified
    if (method.init == decoding::InitScheme::kSampleUp || method.init == decoding::InitScheme::kSampleLeft) {
      CHECK(!cpu_book.stale_p().empty());
    }
  }
}

namespace {

// adopt_window_result of `kernels` on a fresh sjd book's first window (four drafts).
void adopt_on_first_window(const sampling::cuda::WindowResult& kernels) {
  const int64_t vocab = 10;
  const family::TokenLayout layout(vocab, std::vector<int64_t>(12, -1), 3, 4, 0, vocab);
  const decoding::MethodConfig method = decoding::make_method("sjd");
  decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
  book.fill({}, 4, 0);
  model::DraftTree nodes;
  std::vector<std::vector<int>> child_of;
  decoding::build_window(book, 4, nodes, child_of);
  const decoding::WindowInput input{0, layout.length(), 4, &nodes, &child_of, window_probs(nodes, vocab, 0), 0};
  decoding::adopt_window_result(input, kernels, book);
}

// What the kernels report: a window rejected unless it accepted a path.
struct KernelResult {
  std::vector<int64_t> tokens, next_drafts;
  std::vector<int> path;

  sampling::cuda::WindowResult result() const {
    sampling::cuda::WindowResult r;
    r.tokens = tokens;
    r.path = path;
    r.rejected = path.empty();
    r.next_drafts = next_drafts;
    return r;
  }
};

}  // namespace

TEST_CASE("the device verifier's book update refuses a result that drafts the wrong number of positions",
          "[decoding][device]") {
  sampling::cuda::WindowResult kernels;
  kernels.tokens = {3};  // rejected at the first draft: positions 1..4 get next drafts
  kernels.rejected = true;
  kernels.next_drafts = {1, 2, 3};
  CHECK_THROWS_WITH(adopt_on_first_window(kernels), Catch::Contains("drafted 3 positions, the window has 4"));
}

TEST_CASE("the device verifier's book update fails on a draw that found no positive probability",
          "[decoding][device]") {
  // The kernels' draws give -1 when every weight is NaN or zero (non-finite logits), and a
  // bonus of -1 is not committed: -1 must not become a committed token or a next draft.
  // The last case accepted two drafts and dropped its bonus (a -1 draw) far from the image's end.
  for (const KernelResult& c : std::vector<KernelResult>{{{}, {1, 2, 3, 4}, {}},
                                                         {{-1}, {1, 2, 3, 4}, {}},
                                                         {{3}, {1, -1, 3, 4}, {}},
                                                         {{3, 4}, {1, 2, 3}, {0, 1}}}) {
    CHECK_THROWS_WITH(adopt_on_first_window(c.result()), Catch::Contains("no token has a positive probability"));
  }
  sampling::cuda::WindowResult fine;  // the same window with real tokens is adopted
  fine.tokens = {3};
  fine.rejected = true;
  fine.next_drafts = {1, 2, 3, 4};
  CHECK_NOTHROW(adopt_on_first_window(fine));
}

TEST_CASE("the device verifier's book update refuses tokens past the vocabulary and path nodes outside the window",
          "[decoding][device]") {
  // A kernel fault, not bad input: a token of 10 or more would reach the embedding lookup.
  for (const KernelResult& c : std::vector<KernelResult>{{{10}, {1, 2, 3, 4}, {}},
                                                         {{3}, {1, 2, 10, 4}, {}},
                                                         {{3, 4}, {1, 2, 3}, {4}},
                                                         {{3, 4}, {1, 2, 3}, {-2}}}) {
    CHECK_THROWS_WITH(adopt_on_first_window(c.result()), Catch::Contains("past the vocabulary of 10"));
  }
  // The last token and node in range are adopted.
  CHECK_NOTHROW(adopt_on_first_window(KernelResult{{9, 9}, {1, 2, 3}, {0}}.result()));
}
