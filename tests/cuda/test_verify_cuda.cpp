// The verification kernels against the CPU reference on the same inputs and
// Philox streams: spine MRS and tail drafts (sampling::verify_draft,
// decoding::DraftBook::update_tail), bonus draws (sample_race), tree levels
// (sampling::verify_candidates), candidate draws (draw_without_replacement),
// and whole windows (decoding::WindowVerifier::verify). Tokens, accept
// decisions and accepted candidates must be identical, also where an off-spine path goes through a
// forced token's one-candidate level.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "decoding/window_verifier.h"
#include "device_cases.h"
#include "family/token_layout.h"
#include "forced_level_window.h"
#include "model/token_model.h"
#include "sampling/categorical.h"
#include "sampling/cuda_ops.h"
#include "sampling/rejection.h"
#include "sampling/tensor_draws.h"

using namespace sjd;

namespace {

constexpr uint64_t kSeed = 1234;
constexpr uint32_t kSequence = 1;

sampling::RngKey key(uint32_t step, int64_t position, sampling::Purpose purpose, uint32_t sub = 0) {
  sampling::RngKey k;
  k.seed = kSeed;
  k.sequence = kSequence;
  k.step = step;
  k.position = static_cast<uint32_t>(position);
  k.purpose = purpose;
  k.sub = sub;
  return k;
}

sampling::cuda::StepKeys step_keys(uint32_t step, int64_t first, int64_t total) {
  sampling::cuda::StepKeys k;
  k.seed = kSeed;
  k.sequence = kSequence;
  k.step = step;
  k.first_position = first;
  k.total_length = total;
  return k;
}

// Every generated position an image code of a grid of `total` cells.
family::TokenLayout open_layout(int64_t vocab, int64_t rows, int64_t cols) {
  return family::TokenLayout(vocab, std::vector<int64_t>(static_cast<size_t>(rows * cols), -1), rows, cols, 0, vocab);
}

kernels::TailDraw tail_of(decoding::TailUpdate tail) {
  switch (tail) {
    case decoding::TailUpdate::kResample: return kernels::kTailResample;
    case decoding::TailUpdate::kGreedy: return kernels::kTailGreedy;
    case decoding::TailUpdate::kGumbelShared: return kernels::kTailGumbelShared;
    case decoding::TailUpdate::kMaximalCoupling: return kernels::kTailMaximalCoupling;
  }
  return kernels::kTailResample;
}

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU).to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Draft s: q uniform, one-hot, or a random row by s % 3; the token drawn from q.
decoding::Draft make_draft(int64_t vocab, int s, int64_t position) {
  at::Tensor q;
  if (s % 3 == 0) {
    q = at::full({vocab}, 1.0f / static_cast<float>(vocab));
  } else if (s % 3 == 1) {
    q = at::zeros({vocab});
    q[(position * 7919) % vocab] = 1.0f;
  } else {
    q = cuda_testing::random_probs(1, vocab, 500 + static_cast<uint64_t>(s))[0].contiguous();
  }
  return {sampling::sample_race(q.data_ptr<float>(), vocab, key(0, position, sampling::Purpose::kInit)), q};
}

// The window that build_window made of `book`, verified by the kernels (before WindowVerifier::verify
// hands the book its next drafts).
sampling::cuda::WindowResult verify_on_device(const decoding::MethodConfig& method, const decoding::DraftBook& book,
                                              int chain, const model::DraftTree& nodes,
                                              const std::vector<std::vector<int>>& child_of, const at::Tensor& probs,
                                              uint32_t step, int64_t first, int64_t total) {
  const at::Device device = cuda_testing::device();
  sampling::cuda::WindowSpec spec;
  spec.chain = chain;
  spec.node_tokens = nodes.tokens;
  spec.node_depth = nodes.depth;
  spec.child_of = child_of;
  spec.tail = tail_of(method.tail);
  for (int i = 0; i < chain; ++i) {
    spec.drafts.tokens.push_back(book.drafts()[static_cast<size_t>(i)].token);
    spec.drafts.q.push_back(book.drafts()[static_cast<size_t>(i)].q.contiguous().to(device));
  }
  for (const auto& level : book.tree()) spec.levels.push_back({level.candidates, level.q.contiguous().to(device)});
  const auto device_relax = sampling::cuda::upload_relaxation(method.relax, chain, device);
  return sampling::cuda::verify_window(probs.to(device), spec, step_keys(step, first, total), device_relax);
}

}  // namespace

TEST_CASE("spine MRS and tail drafts on the device make the CPU's decisions", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const int64_t vocab = 3001;
  const int chain = 24;
  const family::TokenLayout layout = open_layout(vocab, 5, 25);
  for (int64_t first : {int64_t{100}, int64_t{101}}) {  // 101: the last slot lies past the layout
    const int spine = static_cast<int>(std::min<int64_t>(chain, layout.length() - first));
    for (const auto& [name, relax] : cuda_testing::all_relaxations(vocab)) {
      for (const char* method_name : {"sjd", "jacobi", "scd-gs", "scd-mc"}) {
        decoding::MethodConfig method = decoding::make_method(method_name);
        method.relax = relax;
        const decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
        for (uint32_t step = 0; step < 4; ++step) {
          INFO(method_name << " relax " << name << " first " << first << " step " << step);
          std::vector<decoding::Draft> drafts;
          sampling::cuda::ChainDrafts device_drafts;
          std::vector<int64_t> peak;
          for (int s = 0; s < spine; ++s) {
            drafts.push_back(make_draft(vocab, s, first + s));
            device_drafts.tokens.push_back(drafts.back().token);
            device_drafts.q.push_back(drafts.back().q.to(device));
            peak.push_back(drafts.back().token);
          }
          // Half the slots put most mass on their draft, so both verdicts occur.
          at::Tensor probs = cuda_testing::random_probs(spine + 1, vocab, 40 + step);
          if (step % 2 == 0) probs = cuda_testing::peaked_at(probs, peak, 0.6);

          const auto device_relax = sampling::cuda::upload_relaxation(relax, spine, device);
          const auto verdicts = sampling::cuda::verify_chain(probs.to(device), device_drafts, tail_of(method.tail),
                                                             step_keys(step, first, layout.length()), device_relax);
          const std::vector<int64_t> accepted = as_vector(verdicts.accepted);
          const std::vector<int64_t> mrs = as_vector(verdicts.mrs_token);
          const std::vector<int64_t> tails = as_vector(verdicts.tail_token);
          std::vector<float> scratch(static_cast<size_t>(vocab));
          for (int s = 0; s <= spine; ++s) {
            const int64_t position = first + s;
            const at::Tensor p = probs[s].contiguous();
            const double weight = sampling::relaxation_weight(relax, s + 1, spine);
            if (s < spine) {
              const sampling::VerifyKeys keys{key(step, position, sampling::Purpose::kAccept),
                                              key(step, position, sampling::Purpose::kResidual)};
              const auto expected = sampling::verify_draft(p.data_ptr<float>(), drafts[s].q.data_ptr<float>(), vocab,
                                                           drafts[s].token, relax, weight, keys, scratch.data());
              CHECK(accepted[static_cast<size_t>(s)] == (expected.accepted ? 1 : 0));
              CHECK(mrs[static_cast<size_t>(s)] == expected.token);
            }
            const int64_t expected_tail =
                position < layout.length()
                    ? book.update_tail(position, p, s < spine ? &drafts[static_cast<size_t>(s)] : nullptr, step).token
                    : -1;
            CHECK(tails[static_cast<size_t>(s)] == expected_tail);
          }
        }
      }
    }
  }
}

TEST_CASE("bonus draws on the device equal sample_race on the kSample stream", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const int64_t vocab = 65536;
  const at::Tensor probs = cuda_testing::random_probs(9, vocab, 8, 0.5);
  const std::vector<int32_t> depth = {0, 1, 2, 3, 1, 2, 3, 4, 5};
  const int64_t first = 30, total = 34;  // depths 4 and 5 lie past the layout
  const std::vector<int64_t> got = as_vector(sampling::cuda::sample_slots(probs.to(device), depth, step_keys(6, first, total)));
  for (size_t i = 0; i < depth.size(); ++i) {
    const int64_t position = first + depth[i];
    const int64_t expected =
        position < total ? sampling::sample_race(probs[static_cast<int64_t>(i)].contiguous().data_ptr<float>(), vocab,
                                                 key(6, position, sampling::Purpose::kSample))
                         : -1;
    CHECK(got[i] == expected);
  }
}

namespace {

// Tree levels and candidate draws at one vocabulary size, against the CPU. p's and q's rows have mass on a
// share of the ids (1 - zero_share); `listed`: whether the kernel should verify every level but LANTERN's over
// the ids with mass in shared memory (it may list at most 8192), or over the whole vocabulary.
void check_tree_levels(int64_t vocab, double p_zero_share, double q_zero_share, bool listed) {
  const at::Device device = cuda_testing::device();
  const char* sparse = std::getenv("SJD_SPARSE_TREE_VERIFY");  // 0: device_check.sh turned the listing off
  listed = listed && (sparse == nullptr || std::string(sparse) != "0");
  const int levels = 3, chain = 16, want = 4;
  const int64_t first = 10, total = 200;
  const uint32_t step = 3;
  for (const auto& [name, relax] : cuda_testing::all_relaxations(vocab)) {
    INFO("relax " << name);
    std::vector<sampling::cuda::TreeLevelInput> device_levels;
    std::vector<std::vector<int64_t>> candidates;
    std::vector<at::Tensor> level_q, level_q_device;
    std::vector<int64_t> positions, firsts;
    for (int d = 0; d < levels; ++d) {
      at::Tensor q = cuda_testing::random_probs(1, vocab, 70 + static_cast<uint64_t>(d), q_zero_share)[0].contiguous();
      if (d == levels - 1) {
        // A peaked stale p: its first candidate holds nearly all of q, so the next one's q^(k) divides by the
        // little mass left, which both sides must sum from the row (a float row's sum is 1 only within ~1e-6).
        q.mul_(3e-5f);
        q[q.argmax().item<int64_t>()] += 0.99997f;
      }
      const int64_t position = first + d;
      const int64_t lead = sampling::sample_race(q.data_ptr<float>(), vocab, key(step, position, sampling::Purpose::kInit));
      at::Tensor rest = q.clone();
      rest[lead] = 0.0f;
      std::vector<int64_t> c = {lead};
      const auto more = sampling::draw_without_replacement(rest.data_ptr<float>(), vocab, want - 1,
                                                           key(step, position, sampling::Purpose::kCandidates));
      c.insert(c.end(), more.begin(), more.end());
      candidates.push_back(c);
      level_q.push_back(q);
      level_q_device.push_back(q.to(device));
      device_levels.push_back({c, level_q_device.back()});
      positions.push_back(position);
      firsts.push_back(lead);
    }
    // The candidate draws themselves.
    const std::vector<int64_t> drawn = as_vector(
        sampling::cuda::draw_candidates(level_q_device, positions, firsts, want - 1,
                                        std::vector<sampling::cuda::StepKeys>(positions.size(), step_keys(step, first, total))));
    for (int d = 0; d < levels; ++d) {
      for (int k = 1; k < want; ++k) {
        const int64_t expected = k < static_cast<int>(candidates[d].size()) ? candidates[d][k] : -1;
        CHECK(drawn[static_cast<size_t>(d * (want - 1) + k - 1)] == expected);
      }
    }
    // Slots 0..11 verify level slot % 3; their p favours candidate slot % 4, so
    // first, later and no candidates get accepted.
    const int slots = 12;
    at::Tensor probs = cuda_testing::random_probs(slots, vocab, 90, p_zero_share);
    std::vector<int32_t> slot, depth;
    for (int s = 0; s < slots; ++s) {
      slot.push_back(s);
      depth.push_back(s % levels);
      const auto& c = candidates[static_cast<size_t>(s % levels)];
      if (s % 4 < static_cast<int>(c.size()) && s % 5 != 0) {
        probs[s].mul_(0.3);
        probs[s][c[static_cast<size_t>(s % 4)]] += 0.7f;
      }
    }
    const auto device_relax = sampling::cuda::upload_relaxation(relax, chain, device);
    const auto verdicts = sampling::cuda::verify_tree(probs.to(device), device_levels, slot, depth,
                                                      step_keys(step, first, total), device_relax);
    const std::vector<int64_t> candidate = as_vector(verdicts.candidate);
    const std::vector<int64_t> token = as_vector(verdicts.token);
    const std::vector<int64_t> listed_ids = as_vector(verdicts.listed);
    for (int s = 0; s < slots; ++s) {
      const int d = depth[static_cast<size_t>(s)];
      const int64_t position = first + d;
      const sampling::VerifyKeys keys{key(step, position, sampling::Purpose::kAccept),
                                      key(step, position, sampling::Purpose::kResidual)};
      const auto expected = sampling::verify_candidates(
          probs[s].contiguous().data_ptr<float>(), level_q[static_cast<size_t>(d)].data_ptr<float>(), vocab,
          candidates[static_cast<size_t>(d)], relax, sampling::relaxation_weight(relax, d + 1, chain), keys);
      INFO("slot " << s);
      CHECK(candidate[static_cast<size_t>(s)] == (expected.accepted ? expected.candidate : -1));
      CHECK(token[static_cast<size_t>(s)] == expected.token);
      CHECK((listed_ids[static_cast<size_t>(s)] >= 0) == (listed && relax.kind != sampling::RelaxKind::kLantern));
    }
  }
}

}  // namespace

// The listed path has a tag of its own: device_check.sh switches it off (SJD_SPARSE_TREE_VERIFY=0) when these fail.
TEST_CASE("tree levels over the ids listed in shared memory equal the CPU's recursive verification",
          "[cuda][sparse-tree]") {
  SECTION("2048 ids") { check_tree_levels(2048, 0.3, 0.6, true); }
  // Lumina-mGPT's vocabulary with top-k-like rows: about 2000 ids with mass of 65536.
  SECTION("65536 ids, 3% with mass") { check_tree_levels(65536, 0.97, 0.97, true); }
}

TEST_CASE("tree levels over the whole vocabulary and candidate draws equal the CPU's recursive verification",
          "[cuda]") {
  check_tree_levels(20000, 0.0, 0.0, false);  // 20000 ids with mass: too many to list
}


TEST_CASE("whole windows on the device commit what WindowVerifier commits, tree windows included", "[cuda]") {
  const int64_t vocab = 1500;
  const family::TokenLayout layout = open_layout(vocab, 8, 12);
  for (const char* method_name : {"sjd", "scd-mc", "scd-gs", "jacobi", "sjd-pac"}) {
    decoding::MethodConfig method = decoding::make_method(method_name);
    method.window = 10;
    method.pd_depth = 2;
    method.pd_k = 3;
    decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, kSequence);
    const decoding::WindowVerifier verifier(method, decoding::Mutants{}, kSeed, kSequence);
    std::vector<int64_t> committed;
    int tree_windows = 0;
    for (uint32_t step = 0; static_cast<int64_t>(committed.size()) < layout.length(); ++step) {
      INFO(method_name << " step " << step);
      const int64_t first = static_cast<int64_t>(committed.size());
      const int chain = static_cast<int>(std::min<int64_t>(method.window, layout.length() - first));
      book.fill(committed, chain, step);
      model::DraftTree nodes;
      std::vector<std::vector<int>> child_of;
      decoding::build_window(book, chain, nodes, child_of);
      tree_windows += book.tree().empty() ? 0 : 1;
      // p favours the drafted tokens in about half the windows, so long accepts happen too.
      at::Tensor probs = cuda_testing::random_probs(1 + static_cast<int64_t>(nodes.size()), vocab, 1000 + step, 0.2);
      if (step % 2 == 1) {
        std::vector<int64_t> peak = {nodes.size() > 0 ? nodes.tokens[0] : 0};
        for (size_t i = 1; i <= nodes.size(); ++i) peak.push_back(i < nodes.size() ? nodes.tokens[i] : 0);
        probs = cuda_testing::peaked_at(probs, peak, 0.8);
      }

      const auto got = verify_on_device(method, book, chain, nodes, child_of, probs, step, first, layout.length());
      const decoding::WindowInput input{first, layout.length(), chain, &nodes, &child_of, probs, step};
      const decoding::WindowOutcome expected = verifier.verify(input, book);
      REQUIRE(got.tokens == expected.tokens);
      CHECK(got.path == expected.path);
      CHECK(got.rejected == expected.rejected);
      CHECK(got.sibling_accepts == expected.sibling_accepts);
      std::vector<int64_t> next;
      for (const auto& d : book.drafts()) next.push_back(d.token);
      CHECK(got.next_drafts == next);
      committed.insert(committed.end(), expected.tokens.begin(), expected.tokens.end());
      // The next window's tree, as the decoding loop grows it after a rejection.
      if (method.proactive_tree && expected.rejected) book.grow_tree(method.pd_k, method.pd_depth, step);
    }
    if (std::string(method_name) == "sjd-pac") CHECK(tree_windows > 0);
  }
}

TEST_CASE("a sibling's path through a forced token's one-candidate level: the device walks it as the CPU does",
          "[cuda]") {
  sjd::testing::ForcedLevelWindow w(kSeed, kSequence);
  REQUIRE(w.tree.size() == 3);
  REQUIRE(w.tree[1].candidates.size() == 1);
  const int64_t total = w.layout.length();
  const auto got = verify_on_device(w.method, w.book, sjd::testing::ForcedLevelWindow::kChain, w.nodes, w.child_of,
                                    w.probs, 0, sjd::testing::ForcedLevelWindow::kFirst, total);
  const decoding::WindowVerifier verifier(w.method, decoding::Mutants{}, kSeed, kSequence);
  const decoding::WindowInput input{sjd::testing::ForcedLevelWindow::kFirst, total,
                                    sjd::testing::ForcedLevelWindow::kChain, &w.nodes, &w.child_of, w.probs, 0};
  const decoding::WindowOutcome expected = verifier.verify(input, w.book);
  REQUIRE(expected.path.size() == 3);  // the CPU's walk went through the row end
  CHECK(got.tokens == expected.tokens);
  CHECK(got.path == expected.path);
  CHECK(got.rejected == expected.rejected);
  CHECK(got.sibling_accepts == expected.sibling_accepts);
  std::vector<int64_t> next;
  for (const auto& d : w.book.drafts()) next.push_back(d.token);
  CHECK(got.next_drafts == next);
}

TEST_CASE("candidate draws of a batch's sequences in one call: each on its own stream, a smaller want a prefix",
          "[cuda]") {
  // decoder.cpp draws every sequence's tree candidates at once: other seeds, sequences and steps per
  // row, and the kernel runs the largest want for all, each row keeping its own first `want`.
  const at::Device device = cuda_testing::device();
  const int64_t vocab = 1024;
  const at::Tensor probs = cuda_testing::random_probs(6, vocab, 300, 0.8);
  std::vector<sampling::CandidateDraw> on_cpu, on_device;
  for (int i = 0; i < 6; ++i) {
    const at::Tensor q = probs[i].contiguous();
    const int64_t first = q.argmax().item<int64_t>();
    const int want = i == 5 ? 16 : 1 + (2 * i) % 5;  // 1, 3, 5, 2, 4 and the kernel's most
    const sampling::RngKey key = sampling::make_key(100 + static_cast<uint64_t>(i), static_cast<uint32_t>(i),
                                                    3 + static_cast<uint32_t>(i), 10 + i, sampling::Purpose::kCandidates);
    on_cpu.push_back({q, first, want, key});
    on_device.push_back({q.to(device), first, want, key});
  }
  const std::vector<std::vector<int64_t>> expected = sampling::draw_after(on_cpu);
  CHECK(sampling::draw_after(on_device) == expected);
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("draw " << i);
    CHECK(expected[i].size() <= static_cast<size_t>(on_cpu[i].want));
    CHECK(sampling::draw_after({on_device[i]}) == std::vector<std::vector<int64_t>>{expected[i]});
  }
}

TEST_CASE("initial draws from stale p's of a batch in one call equal sample_from on the CPU", "[cuda]") {
  // decoder.cpp's open_windows draws every sequence's sample-left/up initial drafts at once: each
  // row on its own stream (seed, sequence, step, position; kInit, or scd-gs' kGumbel keyed at step 0).
  const at::Device device = cuda_testing::device();
  const int64_t vocab = 8198;  // not a multiple of the kernel's four tokens per Philox block
  at::Tensor probs = cuda_testing::random_probs(7, vocab, 400, 0.9);
  // Rows 1 and 4 have their mass only in the last, partial Philox block (tokens 8196, 8197):
  // row 1 split between the two (the race decides there), row 4 a point mass.
  probs[1].zero_();
  probs[1][8196] = 0.5f;
  probs[1][8197] = 0.5f;
  probs[4].zero_();
  probs[4][8197] = 1.0f;
  std::vector<sampling::RowDraw> on_cpu, on_device;
  for (int i = 0; i < 7; ++i) {
    const sampling::Purpose purpose = i % 3 == 2 ? sampling::Purpose::kGumbel : sampling::Purpose::kInit;
    const sampling::RngKey key = sampling::make_key(500 + static_cast<uint64_t>(i % 2), static_cast<uint32_t>(i),
                                                    purpose == sampling::Purpose::kGumbel ? 0u : 4u + i, 33 + 7 * i,
                                                    purpose);
    on_cpu.push_back({probs[i].contiguous(), key});
    on_device.push_back({probs[i].contiguous().to(device), key});
  }
  const std::vector<int64_t> expected = sampling::sample_each(on_cpu);
  CHECK(sampling::sample_each(on_device) == expected);
  CHECK(expected[1] >= 8196);
  CHECK(expected[4] == 8197);
  // A row with no positive mass is the CPU's error, not a token of -1.
  on_device[3].q = at::zeros({vocab}, at::TensorOptions().dtype(at::kFloat).device(device));
  CHECK_THROWS_WITH(sampling::sample_each(on_device), Catch::Contains("no token has a positive probability"));
}
