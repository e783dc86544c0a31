// The memory estimate counts what a draft book keeps alive between steps with
// draft_distributions(); here a book is driven through whole generations and
// the float [V] storages it actually holds after every step (drafts' q's, tree
// levels, remembered p's; a row keeps its whole tensor alive) never exceed that
// count. Without the remembered p's term the sample-up and sample-left cases fail.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "decoding/window_verifier.h"

using namespace sjd;

namespace {

// Probabilities [slots, V] that accept some drafts and reject others.
at::Tensor window_probs(const model::DraftTree& nodes, int64_t vocab, uint32_t step) {
  at::manual_seed(300 + step);
  const int64_t slots = 1 + static_cast<int64_t>(nodes.size());
  at::Tensor p = at::softmax(2.0 * at::randn({slots, vocab}), -1);
  for (int64_t s = 0; s + 1 < slots; s += 2) {  // every other slot favours the draft after it
    p[s].mul_(0.3);
    p[s][nodes.tokens[static_cast<size_t>(s)]] += 0.7f;
  }
  return p.contiguous();
}

// Bytes of the distinct storages the book's distributions live in.
int64_t held_bytes(const decoding::DraftBook& book) {
  std::map<const void*, int64_t> storages;
  const auto hold = [&](const at::Tensor& t) {
    if (t.defined()) storages[t.storage().data()] = static_cast<int64_t>(t.storage().nbytes());
  };
  for (const auto& draft : book.drafts()) hold(draft.q);
  for (const auto& level : book.tree()) hold(level.q);
  for (const auto& [position, p] : book.stale_p()) hold(p);
  int64_t bytes = 0;
  for (const auto& [data, n] : storages) bytes += n;
  return bytes;
}

constexpr int64_t kVocab = 64;

// A 5 x 16 grid of free image codes.
family::TokenLayout grid_layout() {
  const int64_t rows = 5, cols = 16;
  return family::TokenLayout(kVocab, std::vector<int64_t>(static_cast<size_t>(rows * cols), -1), rows, cols, 0, kVocab);
}

decoding::MethodConfig with_init(const std::string& name, decoding::InitScheme init) {
  decoding::MethodConfig method = decoding::make_method(name);
  method.init = init;
  return method;
}

}  // namespace

TEST_CASE("a draft book keeps no more distributions than the memory estimate counts", "[decoding][memory]") {
  const int64_t vocab = kVocab;
  const family::TokenLayout layout = grid_layout();
  const auto configured = [](const std::string& name, decoding::InitScheme init) {
    decoding::MethodConfig method = with_init(name, init);
    method.window = 6;
    method.pd_k = 3;
    method.pd_depth = 2;
    return method;
  };
  for (const decoding::MethodConfig& method :
       {configured("sjd", decoding::InitScheme::kRandom), configured("sjd", decoding::InitScheme::kSampleUp),
        configured("scd-mc", decoding::InitScheme::kRepeatUp), configured("jacobi", decoding::InitScheme::kRepeatLeft),
        configured("sjd-pac", decoding::InitScheme::kSampleLeft)}) {
    const decoding::WindowShape largest{method.window, method.proactive_tree ? method.pd_k : 1,
                                        method.proactive_tree ? method.pd_depth : 0};
    const int64_t limit = decoding::draft_distributions(method, largest, layout) * vocab * 4;
    decoding::DraftBook book(layout, method, decoding::Mutants{}, 5, 0);
    const decoding::WindowVerifier verifier(method, decoding::Mutants{}, 5, 0);
    std::vector<int64_t> committed;
    int64_t most = 0;
    for (uint32_t step = 0; static_cast<int64_t>(committed.size()) < layout.length(); ++step) {
      INFO(method.describe() << ", step " << step);
      const int64_t first = static_cast<int64_t>(committed.size());
      const int chain = static_cast<int>(std::min<int64_t>(method.window, layout.length() - first));
      book.fill(committed, chain, step);
      REQUIRE(held_bytes(book) <= limit);
      model::DraftTree nodes;
      std::vector<std::vector<int>> child_of;
      decoding::build_window(book, chain, nodes, child_of);
      const decoding::WindowInput input{first, layout.length(), chain, &nodes, &child_of,
                                        window_probs(nodes, vocab, step), step};
      const decoding::WindowOutcome outcome = verifier.verify(input, book);
      committed.insert(committed.end(), outcome.tokens.begin(), outcome.tokens.end());
      if (method.proactive_tree && outcome.rejected) book.grow_tree(method.pd_k, method.pd_depth, step);
      most = std::max(most, held_bytes(book));
      REQUIRE(held_bytes(book) <= limit);
    }
    CHECK(most > 0);
  }
}

TEST_CASE("ar keeps and counts no remembered p, whatever its init", "[decoding][memory]") {
  const family::TokenLayout layout = grid_layout();
  const decoding::WindowShape ar_step{0, 1, 0};
  const decoding::MethodConfig ar_random = with_init("ar", decoding::InitScheme::kRandom);
  const decoding::MethodConfig ar_up = with_init("ar", decoding::InitScheme::kSampleUp);
  const decoding::MethodConfig sjd_up = with_init("sjd", decoding::InitScheme::kSampleUp);
  CHECK(decoding::draft_distributions(ar_up, ar_step, layout) ==
        decoding::draft_distributions(ar_random, ar_step, layout));
  CHECK(decoding::draft_distributions(sjd_up, ar_step, layout) >
        decoding::draft_distributions(ar_random, ar_step, layout));

  const at::Tensor p = at::softmax(at::randn({kVocab}), 0);
  decoding::DraftBook ar_book(layout, ar_up, decoding::Mutants{}, 5, 0);
  ar_book.remember_p(3, p);
  CHECK(ar_book.stale_p().empty());
  decoding::DraftBook sjd_book(layout, sjd_up, decoding::Mutants{}, 5, 0);
  sjd_book.remember_p(3, p);
  CHECK(sjd_book.stale_p().size() == 1);
}
