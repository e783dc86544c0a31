#include "decoding/window_verifier.h"

#include <algorithm>

#include "sampling/categorical.h"

namespace sjd::decoding {

using sampling::Purpose;

sampling::RngKey WindowVerifier::key(uint32_t step, int64_t position, Purpose purpose, uint32_t sub) const {
  return sampling::make_key(seed_, sequence_, step, position, purpose, sub);
}

void build_window(const DraftBook& book, int chain, model::DraftTree& nodes,
                  std::vector<std::vector<int>>& child_of) {
  nodes.clear();
  for (int i = 0; i < chain; ++i) nodes.push(book.drafts()[static_cast<size_t>(i)].token, i - 1);
  child_of.assign(static_cast<size_t>(chain) + 1, {});
  const auto& tree = book.tree();
  std::vector<int> parents = {-1};  // nodes of the previous depth (-1: the root)
  for (size_t d = 0; d < tree.size() && static_cast<int>(d) < chain; ++d) {
    std::vector<int> level_nodes;
    for (int parent : parents) {
      const size_t parent_slot = static_cast<size_t>(parent + 1);
      const bool spine_parent = parent == static_cast<int>(d) - 1;
      for (size_t k = 0; k < tree[d].candidates.size(); ++k) {
        int node;
        if (spine_parent && k == 0) {
          node = static_cast<int>(d);  // the spine node of this depth
        } else {
          node = static_cast<int>(nodes.size());
          nodes.push(tree[d].candidates[k], parent);
          child_of.emplace_back();  // slot of the new node (may reallocate child_of)
        }
        child_of[parent_slot].push_back(node);
        level_nodes.push_back(node);
      }
    }
    parents = std::move(level_nodes);
  }
}

WindowOutcome WindowVerifier::sample_one(const WindowInput& in) const {
  const at::Tensor p = in.probs[0];
  WindowOutcome out;
  out.tokens.push_back(
      sampling::sample_token(p.data_ptr<float>(), p.numel(), key(in.step, in.first_position, Purpose::kSample)));
  return out;
}

// The mutant's notion of a sibling passing: an independent test per candidate.
static bool passes_alone(const float* p, const TreeLevel& level, int k, const sampling::RngKey& accept) {
  const int64_t c = level.candidates[static_cast<size_t>(k)];
  const double q = level.q.data_ptr<float>()[c];
  sampling::RngKey key = accept;
  key.sub = static_cast<uint32_t>(k);
  return q > 0.0 && sampling::uniform01(key, 0) < std::min(1.0, p[c] / q);
}

int WindowVerifier::longest_path(const WindowInput& in, const std::vector<TreeLevel>& tree, int slot,
                                 int depth) const {
  if (depth >= static_cast<int>(tree.size())) return 0;
  const float* p = in.probs[slot].data_ptr<float>();
  const sampling::RngKey accept = key(in.step, in.first_position + depth, Purpose::kAccept);
  int best = 0;
  const TreeLevel& level = tree[static_cast<size_t>(depth)];
  for (int k = 0; k < static_cast<int>(level.candidates.size()); ++k) {
    if (!passes_alone(p, level, k, accept)) continue;
    const int child = (*in.child_of)[static_cast<size_t>(slot)][static_cast<size_t>(k)];
    best = std::max(best, 1 + longest_path(in, tree, child + 1, depth + 1));
  }
  return best;
}

sampling::VerifyOutcome WindowVerifier::verify_level(const float* p, const std::vector<TreeLevel>& tree, int depth,
                                                     double weight, const WindowInput& in, int slot) const {
  const TreeLevel& level = tree[static_cast<size_t>(depth)];
  const int64_t position = in.first_position + depth;
  const sampling::VerifyKeys keys{key(in.step, position, Purpose::kAccept),
                                  key(in.step, position, Purpose::kResidual)};
  const int64_t vocab = level.q.numel();
  if (!mutants_.longest_sibling) {
    return sampling::verify_candidates(p, level.q.data_ptr<float>(), vocab, level.candidates, method_.relax, weight,
                                       keys, mutants_.candidates);
  }
  // Mutant: keep the passing sibling whose subtree accepts the longest path.
  int chosen = -1, best = -1;
  for (int k = 0; k < static_cast<int>(level.candidates.size()); ++k) {
    if (!passes_alone(p, level, k, keys.accept)) continue;
    const int child = (*in.child_of)[static_cast<size_t>(slot)][static_cast<size_t>(k)];
    const int length = longest_path(in, tree, child + 1, depth + 1);
    if (length > best) {
      best = length;
      chosen = k;
    }
  }
  if (chosen >= 0) return {true, chosen, level.candidates[static_cast<size_t>(chosen)]};
  std::vector<float> residual(static_cast<size_t>(vocab));
  sampling::relaxed_residual(method_.relax, p, level.q.data_ptr<float>(), vocab, level.candidates[0], weight,
                             residual.data());
  return {false, -1, sampling::sample_token(residual.data(), vocab, keys.residual)};
}

WindowOutcome WindowVerifier::verify(const WindowInput& in, DraftBook& book) const {
  const auto& drafts = book.drafts();
  const auto& tree = book.tree();
  const int64_t vocab = in.probs.size(1);
  std::vector<float> scratch(static_cast<size_t>(vocab));
  WindowOutcome out;
  out.tree_window = !tree.empty();
  int slot = 0;
  bool on_spine = true;
  int k = 0;
  int64_t final_token = -1;
  for (; k < in.chain_length; ++k) {
    const int64_t position = in.first_position + k;
    const double weight = sampling::relaxation_weight(method_.relax, k + 1, in.chain_length);
    const float* p = in.probs[slot].data_ptr<float>();
    book.remember_p(position, in.probs[slot]);
    sampling::VerifyOutcome verdict;
    int node = k;
    // A level of several candidates, or any level under an off-spine node: a level of one candidate (a
    // forced token's, or one whose q had no other token to draw) has its node under every path too.
    if (k < static_cast<int>(tree.size()) && (tree[static_cast<size_t>(k)].candidates.size() > 1 || !on_spine)) {
      verdict = verify_level(p, tree, k, weight, in, slot);
      if (verdict.accepted) {
        node = (*in.child_of)[static_cast<size_t>(slot)][static_cast<size_t>(verdict.candidate)];
        out.sibling_accepts += verdict.candidate > 0 ? 1 : 0;
      }
    } else {
      if (!on_spine) break;  // past the tree, only the spine continues as a chain
      const Draft& d = drafts[static_cast<size_t>(k)];
      const sampling::VerifyKeys keys{key(in.step, mutants_.window_wide_accept ? in.first_position : position,
                                          Purpose::kAccept),
                                      key(in.step, position, Purpose::kResidual)};
      verdict = sampling::verify_draft(p, d.q.data_ptr<float>(), vocab, d.token, method_.relax, weight, keys,
                                       scratch.data());
    }
    if (!verdict.accepted) {
      final_token = verdict.token;
      out.rejected = true;
      break;
    }
    out.path.push_back(node);
    out.tokens.push_back(in.nodes->tokens[static_cast<size_t>(node)]);
    slot = node + 1;
    on_spine = on_spine && node == k;
  }
  if (final_token < 0 && in.first_position + k < in.total_length) {  // everything verified passed: bonus
    book.remember_p(in.first_position + k, in.probs[slot]);
    const at::Tensor p = in.probs[slot];
    final_token = sampling::sample_token(p.data_ptr<float>(), vocab,
                                        key(in.step, in.first_position + k, Purpose::kSample));
  }
  if (final_token >= 0) out.tokens.push_back(final_token);

  // Next drafts: every later position with a fresh p on the spine gets the tail update.
  adopt_next_drafts(in, out.tokens.size(), book, [&](int s, const at::Tensor& p, const Draft* old) {
    return book.update_tail(in.first_position + s, p, old, in.step);
  });
  return out;
}

int next_draft_count(const WindowInput& in, size_t committed) {
  const int begin = static_cast<int>(committed);
  int end = begin;
  while (end <= in.chain_length && in.first_position + end < in.total_length) ++end;
  return end - begin;
}

void adopt_next_drafts(const WindowInput& in, size_t committed, DraftBook& book, const NextDraftFn& draft_for) {
  const auto& drafts = book.drafts();
  const int begin = static_cast<int>(committed);
  const int end = begin + next_draft_count(in, committed);
  std::vector<Draft> next;
  for (int s = begin; s < end; ++s) {
    const at::Tensor p = in.probs[s];
    book.remember_p(in.first_position + s, p);
    const Draft* old = s < in.chain_length ? &drafts[static_cast<size_t>(s)] : nullptr;
    Draft draft = draft_for(s, p, old);
    draft.age = (old != nullptr ? old->age : 0) + 1;  // one more p computed for this position
    next.push_back(std::move(draft));
  }
  book.replace(in.first_position + begin, std::move(next), {});
}

}  // namespace sjd::decoding
