#include "decoding/sequence_decoder.h"

#include <chrono>
#include <stdexcept>

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

SequenceDecoder::SequenceDecoder(const family::TokenLayout& layout, DecodeRequest request, const Mutants& mutants)
    : layout_(layout),
      request_(std::move(request)),
      mutants_(mutants),
      total_(layout.length()),
      // Automatic windows are planned for the step of a whole batch: planned_batch sequences of these rows.
      planner_(request_.method, request_.cost_profile,
               static_cast<int>(request_.rows.size()) * std::max(request_.planned_batch, 1)),
      book_(layout, request_.method, mutants_, request_.seed, request_.sequence),
      verifier_(request_.method, mutants_, request_.seed, request_.sequence) {
  const MethodConfig& method = request_.method;
  if (method.speculative() && !method.auto_window && method.window < 1) {
    throw std::invalid_argument("window must be at least 1");
  }
  result_.stats.cost_profile = planner_.profile().summary();
  for (const auto& row : request_.rows) roots_.push_back(row.tokens.back());
  shape_ = planner_.next(false, static_cast<int>(total_));
}

const model::DraftTree& SequenceDecoder::next_window() {
  const std::vector<int64_t>& committed = result_.tokens;
  const int64_t first = static_cast<int64_t>(committed.size());
  int chain = static_cast<int>(std::min<int64_t>(shape_.chain, total_ - first));
  if (mutants_.peeking_window) chain = peeked_chain(request_, step_, first, chain);
  book_.fill(committed, chain, step_);
  build_window(book_, chain, nodes_, child_of_);
  report_ = WindowReport{};
  report_.shape = {chain, shape_.tree_k, static_cast<int>(std::min<size_t>(book_.tree().size(), chain))};
  for (int i = 0; i < chain; ++i) {
    report_.ages.push_back(layout_.forced(first + i) >= 0 ? -1 : book_.drafts()[static_cast<size_t>(i)].age);
  }
  return nodes_;
}

std::vector<sampling::SlotConstraint> SequenceDecoder::slot_constraints() const {
  const int64_t first = static_cast<int64_t>(result_.tokens.size());
  std::vector<sampling::SlotConstraint> constraints;
  constraints.push_back(layout_.constraint(first));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const int64_t predicted = first + nodes_.depth[i];  // the slot of node i predicts this position
    constraints.push_back(predicted < total_ ? layout_.constraint(predicted) : sampling::SlotConstraint{0, {}});
  }
  return constraints;
}

const std::vector<int>& SequenceDecoder::finish_window(const at::Tensor& probs, double forward_seconds,
                                                       double pipeline_seconds) {
  RunStats& stats = result_.stats;
  std::vector<int64_t>& committed = result_.tokens;
  const int64_t first = static_cast<int64_t>(committed.size());
  const int chain = report_.shape.chain;
  stats.forward_seconds += forward_seconds;
  stats.pipeline_seconds += pipeline_seconds;

  const auto t0 = Clock::now();
  const WindowInput input{first, total_, chain, &nodes_, &child_of_, probs, step_};
  const MethodConfig& method = request_.method;
  outcome_ = method.speculative() ? verifier_.verify(input, book_) : verifier_.sample_one(input);
  stats.verify_seconds += since(t0);

  committed.insert(committed.end(), outcome_.tokens.begin(), outcome_.tokens.end());
  stats.record_step(first, static_cast<int64_t>(outcome_.tokens.size()));
  stats.record_window(report_.shape.chain, report_.shape.tree_k, report_.shape.tree_depth);
  stats.tree_windows += outcome_.tree_window ? 1 : 0;
  stats.sibling_accepts += outcome_.sibling_accepts;
  roots_.assign(roots_.size(), committed.back());
  if (request_.on_step) request_.on_step({static_cast<int64_t>(committed.size()), total_, stats.steps});

  // The next window's shape from this and earlier outcomes, then its tree (drawn now, on this step's streams).
  report_.accepted = static_cast<int>(outcome_.path.size());
  report_.rejected = outcome_.rejected;
  planner_.record(report_);
  const int remaining = static_cast<int>(total_ - static_cast<int64_t>(committed.size()));
  shape_ = planner_.next(outcome_.rejected, remaining);
  if (method.proactive_tree && outcome_.rejected && shape_.tree_k > 1) {
    book_.grow_tree(shape_.tree_k, shape_.tree_depth, step_);
  }
  ++step_;
  return outcome_.path;
}

}  // namespace sjd::decoding
