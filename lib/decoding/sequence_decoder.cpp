#include "decoding/sequence_decoder.h"

#include <chrono>
#include <stdexcept>

#include "sampling/philox.h"

namespace sjd::decoding {
namespace {

using Clock = std::chrono::steady_clock;

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

SequenceDecoder::SequenceDecoder(const family::TokenLayout& layout, DecodeRequest request, const Mutants& mutants,
                                 at::Device verify_on)
    : layout_(layout),
      request_(std::move(request)),
      mutants_(mutants),
      total_(layout.length()),
      // Automatic windows are planned for the step of a whole batch: planned_batch sequences of these rows.
      planner_(request_.method, request_.cost_profile,
               static_cast<int>(request_.rows.size()) * std::max(request_.planned_batch, 1),
               WindowPrior{request_.window_prior, request_.planned_batch <= 1}),
      book_(layout, request_.method, mutants_, request_.seed, request_.sequence, verify_on),
      verifier_(request_.method, mutants_, request_.seed, request_.sequence),
      device_verifier_(request_.method, request_.seed, request_.sequence) {
  if (!verify_on.is_cpu() && mutants_.any()) {
    throw std::invalid_argument("the test mutants exist only in the CPU verifier");
  }
  const MethodConfig& method = request_.method;
  if (method.speculative() && !method.auto_window && method.window < 1) {
    throw std::invalid_argument("window must be at least 1");
  }
  if (method.planned_windows()) {  // fixed windows read neither the profile nor the prior
    result_.stats.cost_profile = planner_.profile().summary();
    result_.stats.window_prior = planner_.prior_by_age();
    result_.stats.window_learning = planner_.learns();
  }
  result_.stats.verifier = verify_on.str();
  for (const auto& row : request_.rows) roots_.push_back(row.tokens.back());
  shape_ = planner_.next(false, static_cast<int>(total_));
}

std::vector<sampling::RowDraw> SequenceDecoder::plan_window() {
  const std::vector<int64_t>& committed = result_.tokens;
  const int64_t first = static_cast<int64_t>(committed.size());
  int chain = static_cast<int>(std::min<int64_t>(shape_.chain, total_ - first));
  if (mutants_.peeking_window) chain = peeked_chain(request_, step_, first, chain);
  planned_chain_ = chain;
  return book_.plan_fill(committed, chain, step_);
}

const model::DraftTree& SequenceDecoder::next_window(const std::vector<int64_t>& drawn) {
  const std::vector<int64_t>& committed = result_.tokens;
  const int64_t first = static_cast<int64_t>(committed.size());
  const int chain = planned_chain_;
  book_.finish_fill(committed, drawn);
  build_window(book_, chain, nodes_, child_of_);
  report_ = WindowReport{};
  report_.shape = {chain, shape_.tree_k, static_cast<int>(std::min<size_t>(book_.tree().size(), chain))};
  for (int i = 0; i < chain; ++i) {
    report_.ages.push_back(layout_.forced(first + i) >= 0 ? -1 : book_.drafts()[static_cast<size_t>(i)].age);
  }
  for (int d = 0; d < report_.shape.tree_depth; ++d) {
    report_.tree_candidates.push_back(static_cast<int>(book_.tree()[static_cast<size_t>(d)].candidates.size()));
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

at::Tensor SequenceDecoder::verify_window(const at::Tensor& probs) {
  const bool on_device = verifies_on_device();
  // For the CPU verifier of a GPU's probabilities, the copy (which waits for the device) is part of
  // the verification: StepTimer gives it the step's time outside the forward and the pipeline.
  const auto t0 = Clock::now();
  const at::Tensor p = on_device ? probs : probabilities_to_host(probs);
  input_ = WindowInput{static_cast<int64_t>(result_.tokens.size()), total_, report_.shape.chain, &nodes_, &child_of_,
                       p, step_};
  if (on_device) return device_verifier_.queue(input_, book_);
  const MethodConfig& method = request_.method;
  outcome_ = method.speculative() ? verifier_.verify(input_, book_) : verifier_.sample_one(input_);
  verify_seconds_ = seconds_since(t0);
  return {};
}

const std::vector<int>& SequenceDecoder::finish_window(const at::Tensor& verdict) {
  if (verdict.defined() != verifies_on_device()) {
    throw std::logic_error(verifies_on_device() ? "finish_window: the device verification's verdict is missing"
                                                : "finish_window: a verdict for a sequence verified on the CPU");
  }
  if (verdict.defined()) outcome_ = device_verifier_.adopt(input_, verdict, book_);
  const MethodConfig& method = request_.method;
  RunStats& stats = result_.stats;
  std::vector<int64_t>& committed = result_.tokens;
  const int64_t first = input_.first_position;
  input_.probs = at::Tensor();  // the window's probabilities live on only as the book's q and p rows
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
  tree_draws_.clear();
  if (method.proactive_tree && outcome_.rejected && shape_.tree_k > 1) {
    tree_draws_ = book_.plan_tree(shape_.tree_k, shape_.tree_depth, step_);
  }
  ++step_;
  return outcome_.path;
}

void SequenceDecoder::charge_step(const StepSeconds& share, bool host_timed) {
  RunStats& stats = result_.stats;
  stats.forward_seconds += share.forward;
  stats.pipeline_seconds += share.pipeline;
  stats.verify_seconds += host_timed ? verify_seconds_ : share.verify;
}

DecodeResult SequenceDecoder::take_result() {
  result_.stats.drafts_by_age.clear();
  for (const auto& tally : planner_.tallies()) result_.stats.drafts_by_age.emplace_back(tally.tested, tally.accepted);
  return std::move(result_);
}

}  // namespace sjd::decoding
