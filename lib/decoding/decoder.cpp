#include "decoding/decoder.h"

#include <chrono>
#include <stdexcept>

#include "decoding/draft_book.h"
#include "decoding/window_planner.h"
#include "decoding/window_verifier.h"
#include "sampling/philox.h"

namespace sjd::decoding {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The window's draft nodes: the chain (spine) first, so accepting the spine
// needs no KV copies; then, for tree levels, every other candidate under every
// node of the level above. child_of[slot][k] is the node holding candidate k
// under the node in `slot` (slot 0: the root).
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

// The peeking mutant: a window shaped by this step's own accept draws (what an
// automatic window must never do) keeps only drafts about to be tested with a
// small uniform, which makes acceptance more likely than MRS allows.
int peeked_chain(const DecodeRequest& request, uint32_t step, int64_t first, int chain) {
  int k = 0;
  while (k < chain && sampling::uniform01(sampling::make_key(request.seed, request.sequence, step, first + k,
                                                             sampling::Purpose::kAccept), 0) < 0.5) {
    ++k;
  }
  return k;
}

}  // namespace

DecodeResult decode(model::TokenModel& model, const family::TokenLayout& layout, const DecodeRequest& request,
                    const Mutants& mutants) {
  const MethodConfig& method = request.method;
  if (method.speculative() && !method.auto_window && method.window < 1) {
    throw std::invalid_argument("window must be at least 1");
  }
  const int64_t total = layout.length();
  WindowPlanner planner(method, request.cost_profile, static_cast<int>(request.rows.size()));
  DecodeResult result;
  RunStats& stats = result.stats;
  stats.cost_profile = planner.profile().summary();
  auto t0 = Clock::now();
  model.restrict_outputs(layout.emittable());
  model.start(request.rows, total, window_nodes(planner.largest()));
  stats.prefill_seconds = since(t0);

  std::vector<int64_t> roots;
  for (const auto& row : request.rows) roots.push_back(row.tokens.back());
  DraftBook book(layout, method, mutants, request.seed, request.sequence);
  const WindowVerifier verifier(method, mutants, request.seed, request.sequence);
  model::DraftTree nodes;
  std::vector<std::vector<int>> child_of;
  std::vector<int64_t>& committed = result.tokens;
  WindowShape shape = planner.next(false, static_cast<int>(total));

  for (uint32_t step = 0; static_cast<int64_t>(committed.size()) < total; ++step) {
    const int64_t first = static_cast<int64_t>(committed.size());
    int chain = static_cast<int>(std::min<int64_t>(shape.chain, total - first));
    if (mutants.peeking_window) chain = peeked_chain(request, step, first, chain);
    book.fill(committed, chain, step);
    build_window(book, chain, nodes, child_of);
    WindowReport report;
    report.shape = {chain, shape.tree_k, static_cast<int>(std::min<size_t>(book.tree().size(), chain))};
    for (int i = 0; i < chain; ++i) {
      report.ages.push_back(layout.forced(first + i) >= 0 ? -1 : book.drafts()[static_cast<size_t>(i)].age);
    }

    t0 = Clock::now();
    const at::Tensor logits = model.forward(roots, nodes);
    stats.forward_seconds += since(t0);

    t0 = Clock::now();
    std::vector<sampling::SlotConstraint> constraints;
    constraints.push_back(layout.constraint(first));
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int64_t predicted = first + nodes.depth[i];  // the slot of node i predicts this position
      constraints.push_back(predicted < total ? layout.constraint(predicted) : sampling::SlotConstraint{0, {}});
    }
    const at::Tensor probs = sampling::run_logits_pipeline(logits, constraints, request.pipeline);
    stats.pipeline_seconds += since(t0);

    t0 = Clock::now();
    const WindowInput input{first, total, chain, &nodes, &child_of, probs, step};
    const WindowOutcome outcome = method.speculative() ? verifier.verify(input, book) : verifier.sample_one(input);
    stats.verify_seconds += since(t0);

    model.commit(outcome.path);
    committed.insert(committed.end(), outcome.tokens.begin(), outcome.tokens.end());
    stats.record_step(first, static_cast<int64_t>(outcome.tokens.size()));
    stats.record_window(report.shape.chain, report.shape.tree_k, report.shape.tree_depth);
    stats.tree_windows += outcome.tree_window ? 1 : 0;
    stats.sibling_accepts += outcome.sibling_accepts;
    roots.assign(roots.size(), committed.back());
    if (request.on_step) request.on_step({static_cast<int64_t>(committed.size()), total, stats.steps});

    // The next window's shape from this and earlier outcomes, then its tree (drawn now, on this step's streams).
    report.accepted = static_cast<int>(outcome.path.size());
    report.rejected = outcome.rejected;
    planner.record(report);
    const int remaining = static_cast<int>(total - static_cast<int64_t>(committed.size()));
    shape = planner.next(outcome.rejected, remaining);
    if (method.proactive_tree && outcome.rejected && shape.tree_k > 1) book.grow_tree(shape.tree_k, shape.tree_depth, step);
  }
  return result;
}

}  // namespace sjd::decoding
