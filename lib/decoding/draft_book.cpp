#include "decoding/draft_book.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "sampling/categorical.h"
#include "sampling/rejection.h"
#include "sampling/tensor_draws.h"

namespace sjd::decoding {

using sampling::Purpose;

DraftBook::DraftBook(const family::TokenLayout& layout, const MethodConfig& method, const Mutants& mutants,
                     uint64_t seed, uint32_t sequence, at::Device device)
    : layout_(layout), method_(method), mutants_(mutants), seed_(seed), sequence_(sequence), device_(device) {
  const at::Tensor mask = layout_.image_mask().to(at::kFloat);
  uniform_image_q_host_ = (mask / mask.sum()).contiguous();
  uniform_image_q_ = uniform_image_q_host_.to(device_);
}

sampling::RngKey DraftBook::key(uint32_t step, int64_t position, Purpose purpose) const {
  return sampling::make_key(seed_, sequence_, step, position, purpose);
}

at::Tensor DraftBook::one_hot(int64_t token) const {
  at::Tensor q = at::zeros({layout_.vocab_size()}, at::TensorOptions().dtype(at::kFloat).device(device_));
  q[token] = 1.0f;
  return q;
}

int64_t DraftBook::token_at(const std::vector<int64_t>& committed, int64_t position) const {
  if (position < static_cast<int64_t>(committed.size())) return committed[static_cast<size_t>(position)];
  return drafts_[static_cast<size_t>(position - first_)].token;
}

sampling::RngKey DraftBook::init_key(int64_t position, uint32_t step) const {
  // scd-gs draws every draft of a position with the same Gumbel noise, initial ones included.
  return method_.tail == TailUpdate::kGumbelShared ? gumbel_key(position) : key(step, position, Purpose::kInit);
}

sampling::RngKey DraftBook::gumbel_key(int64_t position) const {
  // No step: a position's noise is shared across iterations, so its draft changes only as its p does.
  return key(0, mutants_.shared_gumbel ? 0 : position, Purpose::kGumbel);
}

int64_t DraftBook::neighbour_of(int64_t position) const {
  const InitScheme scheme = method_.init;
  if (scheme == InitScheme::kRandom) return -1;
  const bool left = scheme == InitScheme::kRepeatLeft || scheme == InitScheme::kSampleLeft;
  // The preferred neighbour, else the other one (first column / first row).
  const int64_t preferred = left ? layout_.left_of(position) : layout_.up_of(position);
  return preferred >= 0 ? preferred : (left ? layout_.up_of(position) : layout_.left_of(position));
}

const at::Tensor* DraftBook::stale_source(int64_t position) const {
  if (!method_.drafts_from_stale_p()) return nullptr;
  if (layout_.forced(position) >= 0) return nullptr;
  const int64_t neighbour = neighbour_of(position);
  if (neighbour < 0) return nullptr;
  const auto it = stale_p_.find(neighbour);
  return it == stale_p_.end() ? nullptr : &it->second;
}

Draft DraftBook::initialise(const std::vector<int64_t>& committed, int64_t position, uint32_t step,
                            int64_t stale_draw) const {
  const int64_t forced = layout_.forced(position);
  if (forced >= 0) return {forced, one_hot(forced)};  // structure tokens are drafted as themselves
  if (const at::Tensor* p = stale_source(position)) {
    return {stale_draw, mutants_.uniform_stale_q ? uniform_image_q_ : *p};
  }
  const int64_t neighbour = neighbour_of(position);
  if (neighbour >= 0 && (method_.init == InitScheme::kRepeatLeft || method_.init == InitScheme::kRepeatUp)) {
    const int64_t token = token_at(committed, neighbour);
    return {token, one_hot(token)};  // a deterministic copy: q is exactly a point mass
  }
  // Random, or a neighbour with no p yet: a uniform draw over the image codes.
  const int64_t token = sampling::sample_from(uniform_image_q_host_, init_key(position, step));
  return {token, mutants_.one_hot_random_init ? one_hot(token) : uniform_image_q_};
}

void DraftBook::fill(const std::vector<int64_t>& committed, int64_t count, uint32_t step) {
  finish_fill(committed, sampling::sample_each(plan_fill(committed, count, step)));
}

std::vector<sampling::RowDraw> DraftBook::plan_fill(const std::vector<int64_t>& committed, int64_t count,
                                                    uint32_t step) {
  const int64_t first = static_cast<int64_t>(committed.size());
  while (first_ < first && !drafts_.empty()) {  // positions committed since
    drafts_.pop_front();
    ++first_;
  }
  first_ = first;
  std::vector<sampling::RowDraw> draws;
  for (int64_t position = first + static_cast<int64_t>(drafts_.size()); position < first + count; ++position) {
    if (const at::Tensor* p = stale_source(position)) draws.push_back({*p, init_key(position, step)});
  }
  fill_planned_ = true;
  fill_count_ = count;
  fill_step_ = step;
  fill_draws_ = draws.size();
  return draws;
}

void DraftBook::finish_fill(const std::vector<int64_t>& committed, const std::vector<int64_t>& drawn) {
  if (!fill_planned_ || drawn.size() != fill_draws_) {
    throw std::logic_error("DraftBook::finish_fill: " + std::to_string(drawn.size()) + " draws for " +
                           (fill_planned_ ? std::to_string(fill_draws_) + " planned" : std::string("no plan")));
  }
  fill_planned_ = false;
  auto next = drawn.begin();
  while (static_cast<int64_t>(drafts_.size()) < fill_count_) {
    const int64_t position = first_ + static_cast<int64_t>(drafts_.size());
    const int64_t stale_draw = stale_source(position) != nullptr ? *next++ : -1;
    drafts_.push_back(initialise(committed, position, fill_step_, stale_draw));
  }
  if (static_cast<int64_t>(drafts_.size()) > fill_count_) drafts_.resize(static_cast<size_t>(fill_count_));
  if (static_cast<int64_t>(tree_.size()) > fill_count_) tree_.resize(static_cast<size_t>(fill_count_));
}

void DraftBook::remember_p(int64_t position, const at::Tensor& p) {
  // A copy of the row: a view would keep its step's whole [slots, V] probabilities alive for a
  // grid row of positions (hundreds of MiB of a GPU's memory per sequence for Lumina).
  if (method_.drafts_from_stale_p()) stale_p_[position] = p.clone();
}

void DraftBook::replace(int64_t first, std::vector<Draft> next, std::vector<TreeLevel> tree) {
  first_ = first;
  drafts_.assign(std::make_move_iterator(next.begin()), std::make_move_iterator(next.end()));
  tree_ = std::move(tree);
  // sample-up reads p one grid row back (row ends included); older ones are dropped.
  const int64_t keep_from = first - layout_.grid_width() - 2;
  stale_p_.erase(stale_p_.begin(), stale_p_.lower_bound(keep_from));
}

int64_t draft_distributions(const MethodConfig& method, const WindowShape& largest, const family::TokenLayout& layout) {
  const int64_t nodes = window_nodes(largest);
  int64_t count = (1 + nodes) + largest.chain + 2;
  if (method.drafts_from_stale_p()) {
    // What replace() keeps: one grid row back, up to the spine's last position (a tree path
    // is no longer than the spine, so its committed positions lie within it too).
    count += layout.grid_width() + 2 + 1 + largest.chain;
  }
  return count;
}

Draft DraftBook::update_tail(int64_t position, const at::Tensor& p, const Draft* old, uint32_t step) const {
  if (!p.is_cpu())
    throw std::logic_error("DraftBook::update_tail: p must be on the CPU (the device verifier drafts itself)");
  const float* pp = p.data_ptr<float>();
  const int64_t n = p.numel();
  switch (method_.tail) {
    case TailUpdate::kGreedy:
      return {sampling::argmax(pp, n), p};
    case TailUpdate::kGumbelShared: {
      return {sampling::sample_token(pp, n, gumbel_key(position)), p};
    }
    case TailUpdate::kMaximalCoupling:
      if (old != nullptr) {
        std::vector<float> scratch(static_cast<size_t>(n));
        const sampling::VerifyKeys keys{key(step, position, Purpose::kAccept), key(step, position, Purpose::kResidual)};
        // Always the exact coupling, also under a relaxation (which loosens only what is committed): its output is
        // distributed as p, which is what the next verification takes as its q (the stale-q mutant keeps the old
        // one). The same uniforms served this position's verification, whose outcome was not committed.
        const sampling::Relaxation exact;
        const sampling::Relaxation& relax = mutants_.relaxed_coupling ? method_.relax : exact;
        const auto outcome = sampling::verify_draft(pp, old->q.data_ptr<float>(), n, old->token, relax,
                                                    sampling::relaxation_weight(relax, 1, 1), keys, scratch.data());
        return {outcome.token, mutants_.stale_q ? old->q : p};
      }
      [[fallthrough]];
    case TailUpdate::kResample:
      return {sampling::sample_token(pp, n, key(step, position, Purpose::kJacobi)), p};
  }
  return {};
}

void DraftBook::grow_tree(int k, int depth, uint32_t step) {
  add_tree_candidates(sampling::draw_after(plan_tree(k, depth, step)));
}

std::vector<sampling::CandidateDraw> DraftBook::plan_tree(int k, int depth, uint32_t step) {
  tree_.clear();
  drawn_levels_.clear();
  std::vector<sampling::CandidateDraw> draws;
  for (int d = 0; d < depth && d < static_cast<int>(drafts_.size()); ++d) {
    const Draft& first = drafts_[static_cast<size_t>(d)];
    const int64_t position = first_ + d;
    tree_.push_back(TreeLevel{{first.token}, first.q});
    if (layout_.forced(position) >= 0) continue;  // a point mass has one candidate
    // The rest are drawn without replacement from q given that `first` came first.
    draws.push_back({first.q, first.token, k - 1, key(step, position, Purpose::kCandidates)});
    drawn_levels_.push_back(tree_.size() - 1);
  }
  return draws;
}

void DraftBook::add_tree_candidates(const std::vector<std::vector<int64_t>>& drawn) {
  if (drawn.size() != drawn_levels_.size()) {
    throw std::logic_error("DraftBook::add_tree_candidates: " + std::to_string(drawn.size()) + " draws for " +
                           std::to_string(drawn_levels_.size()) + " planned levels");
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    std::vector<int64_t>& candidates = tree_[drawn_levels_[i]].candidates;
    candidates.insert(candidates.end(), drawn[i].begin(), drawn[i].end());
  }
  drawn_levels_.clear();
}

}  // namespace sjd::decoding
