#include "decoding/device_verifier.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sampling/categorical.h"

namespace sjd::decoding {

WindowOutcome adopt_window_result(const WindowInput& in, const sampling::cuda::WindowResult& result,
                                  DraftBook& book) {
  // A kernel's draw that found no positive weight (non-finite logits) gives -1, and a bonus
  // of -1 is not committed: fail as the CPU verifier does before -1 reaches the model.
  // A window commits its accepted path plus a residual or bonus token unless the path reaches
  // the image's end, so a result without that token before the end had a -1 draw dropped.
  const auto negative = [](int64_t t) { return t < 0; };
  const bool dropped = result.tokens.size() == result.path.size() &&
                       in.first_position + static_cast<int64_t>(result.tokens.size()) < in.total_length;
  if (result.tokens.empty() || dropped || std::any_of(result.tokens.begin(), result.tokens.end(), negative) ||
      std::any_of(result.next_drafts.begin(), result.next_drafts.end(), negative)) {
    sampling::throw_no_positive_probability();
  }
  // Anything else out of range is a fault of the kernels: refused here, before an embedding
  // lookup's device-side assert would leave the CUDA context unusable.
  const int64_t vocab = in.probs.size(-1);
  const auto outside_vocab = [vocab](int64_t t) { return t >= vocab; };
  const auto outside_nodes = [&](int n) { return n < 0 || n >= static_cast<int>(in.nodes->size()); };
  if (std::any_of(result.tokens.begin(), result.tokens.end(), outside_vocab) ||
      std::any_of(result.next_drafts.begin(), result.next_drafts.end(), outside_vocab) ||
      std::any_of(result.path.begin(), result.path.end(), outside_nodes)) {
    throw std::logic_error("device verifier: the kernels returned a token past the vocabulary of " +
                           std::to_string(vocab) + " or a path node outside the window's " +
                           std::to_string(in.nodes->size()));
  }
  WindowOutcome out;
  out.path = result.path;
  out.tokens = result.tokens;
  out.rejected = result.rejected;
  out.tree_window = !book.tree().empty();
  out.sibling_accepts = result.sibling_accepts;

  // Each committed position's p is its slot's on the accepted path (the root's, then the one
  // after each accepted node)...
  const int64_t first = in.first_position;
  int slot = 0;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    book.remember_p(first + static_cast<int64_t>(i), in.probs[slot]);
    if (i < out.path.size()) slot = out.path[i] + 1;
  }
  // ... and every later spine slot's p becomes the q of its position's next draft.
  const int expected = next_draft_count(in, out.tokens.size());
  if (static_cast<size_t>(expected) != result.next_drafts.size()) {
    throw std::logic_error("device verifier: the kernels drafted " + std::to_string(result.next_drafts.size()) +
                           " positions, the window has " + std::to_string(expected) + " after the commit");
  }
  const int begin = static_cast<int>(out.tokens.size());
  adopt_next_drafts(in, out.tokens.size(), book, [&](int s, const at::Tensor& p, const Draft*) {
    return Draft{result.next_drafts[static_cast<size_t>(s - begin)], p};
  });
  return out;
}

bool device_kernels_take(const MethodConfig& method) {
  const int k = !method.proactive_tree ? 1 : method.auto_tree ? WindowPlanner::kMaxAutoK : method.pd_k;
  if (k - 1 > kernels::kMaxCandidates) return false;
  const sampling::Relaxation& relax = method.relax;
  if (relax.kind == sampling::RelaxKind::kLantern) {
    const int64_t columns = relax.neighbours.defined() ? relax.neighbours.size(1) : relax.lantern_k;
    if (std::min<int64_t>(relax.lantern_k, columns) > kernels::kMaxLanternNeighbours) return false;
  }
  return true;
}

#ifdef SJD_WITH_CUDA

namespace {

kernels::TailDraw tail_draw(TailUpdate tail) {
  switch (tail) {
    case TailUpdate::kResample: return kernels::kTailResample;
    case TailUpdate::kGreedy: return kernels::kTailGreedy;
    case TailUpdate::kGumbelShared: return kernels::kTailGumbelShared;
    case TailUpdate::kMaximalCoupling: return kernels::kTailMaximalCoupling;
  }
  throw std::logic_error("device verifier: unknown tail update");
}

}  // namespace

sampling::cuda::StepKeys DeviceVerifier::keys(const WindowInput& in) const {
  return {seed_, sequence_, in.step, in.first_position, in.total_length};
}

const sampling::cuda::DeviceRelaxation& DeviceVerifier::relaxation(int chain, at::Device device) {
  auto it = relaxations_.find(chain);
  if (it == relaxations_.end()) {
    it = relaxations_.emplace(chain, sampling::cuda::upload_relaxation(method_.relax, chain, device)).first;
  }
  return it->second;
}

at::Tensor DeviceVerifier::queue(const WindowInput& in, const DraftBook& book) {
  if (!method_.speculative()) return sampling::cuda::sample_slots(in.probs, {0}, keys(in));
  const auto& drafts = book.drafts();
  sampling::cuda::WindowSpec spec;
  spec.chain = in.chain_length;
  spec.node_tokens = in.nodes->tokens;
  spec.node_depth = in.nodes->depth;
  spec.child_of = *in.child_of;
  spec.tail = tail_draw(method_.tail);
  for (int i = 0; i < in.chain_length; ++i) {
    const Draft& draft = drafts[static_cast<size_t>(i)];
    spec.drafts.tokens.push_back(draft.token);
    spec.drafts.q.push_back(draft.q);
  }
  for (const TreeLevel& level : book.tree()) spec.levels.push_back({level.candidates, level.q});
  return sampling::cuda::queue_window(in.probs, spec, keys(in), relaxation(in.chain_length, in.probs.device()));
}

#else  // no CUDA in this build: no tensor can be on a CUDA device, so nothing calls this

at::Tensor DeviceVerifier::queue(const WindowInput&, const DraftBook&) {
  throw std::invalid_argument("device verifier: this build of sjd has no CUDA");
}

#endif

WindowOutcome DeviceVerifier::adopt(const WindowInput& in, const at::Tensor& verdict, DraftBook& book) const {
  if (method_.speculative()) {
    return adopt_window_result(in, sampling::cuda::unpack_window(verdict, in.chain_length), book);
  }
  const int64_t token = verdict.item<int64_t>();
  if (token < 0) sampling::throw_no_positive_probability();  // as sampling::sample_token: -1 must never reach the model
  WindowOutcome out;
  out.tokens.push_back(token);
  return out;
}

WindowOutcome DeviceVerifier::verify(const WindowInput& in, DraftBook& book) {
  return adopt(in, queue(in, book).to(at::kCPU), book);
}

}  // namespace sjd::decoding
