// The CUDA kernels behind at::Tensor arguments: checks, device copies of the
// small per-step inputs, launches on the current stream. The whole file is
// compiled only with SJD_WITH_CUDA (sjd_area picks up every .cpp of the folder).
#ifdef SJD_WITH_CUDA

#include "sampling/cuda_ops.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "io/device_transfer.h"
#include "io/step_upload.h"

namespace sjd::sampling::cuda {
namespace {

kernels::StreamHandle stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

void require_cuda(const at::Tensor& t, const char* name) {
  if (!t.defined() || !t.is_cuda())
    throw std::invalid_argument(std::string("cuda ops: ") + name + " must be a CUDA tensor");
}

// probs must be float32, contiguous, [rows, V] with at least `rows` rows.
void require_probs(const at::Tensor& probs, int64_t rows) {
  require_cuda(probs, "probs");
  if (probs.dim() != 2 || probs.scalar_type() != at::kFloat || !probs.is_contiguous() || probs.size(0) < rows) {
    throw std::invalid_argument("cuda ops: probs must be a contiguous float32 [>= " + std::to_string(rows) +
                                ", V] tensor, got " + std::to_string(probs.dim()) + " dims of " +
                                std::string(c10::toString(probs.scalar_type())));
  }
}

// The device addresses of q rows (each contiguous float32 [vocab] on the kernel's `device`), for a
// table of row pointers (const float* const*); one placeholder when there are none.
std::vector<int64_t> row_addresses(const std::vector<at::Tensor>& rows, int64_t vocab, at::Device device,
                                   const char* name) {
  std::vector<int64_t> addresses;
  for (const at::Tensor& q : rows) {
    require_cuda(q, name);
    // A pointer into another GPU's memory would fault in the kernel, or be read through peer access.
    if (q.device() != device) {
      throw std::invalid_argument(std::string("cuda ops: a ") + name + " row is on " + q.device().str() +
                                  ", the kernel runs on " + device.str());
    }
    if (q.scalar_type() != at::kFloat || !q.is_contiguous() || q.numel() != vocab) {
      throw std::invalid_argument(std::string("cuda ops: ") + name + " rows must be contiguous float32 [" +
                                  std::to_string(vocab) + "]");
    }
    addresses.push_back(reinterpret_cast<int64_t>(q.data_ptr<float>()));
  }
  if (addresses.empty()) addresses.push_back(0);
  return addresses;
}

const float* const* as_rows(const io::StepUpload& up, size_t table) {
  return reinterpret_cast<const float* const*>(up.data<int64_t>(table));
}

// A host array, or the one-element placeholder an empty one is uploaded as (a valid address).
template <typename T>
std::vector<T> or_placeholder(const std::vector<T>& values, T placeholder) {
  return values.empty() ? std::vector<T>{placeholder} : values;
}

kernels::StepInfo step_info(const StepKeys& k) {
  kernels::StepInfo s;
  s.seed = k.seed;
  s.sequence = k.sequence;
  s.step = k.step;
  s.first_position = k.first_position;
  s.total_length = k.total_length;
  return s;
}

// The device copy of a long-lived host table: the layout's image mask (every window's image
// slots share it) and LANTERN's neighbour table (every chain length's relaxation) go up
// once, not every step or chain length. The cache holds the host tensor too, so its address
// cannot be taken by another table while cached; a cached table's values must not change.
// It is never destroyed: device tensors freed after CUDA's own teardown at exit can crash.
at::Tensor cached_upload(const at::Tensor& host, at::ScalarType dtype, at::Device device) {
  if (!host.is_cpu()) return host.to(device, dtype).contiguous();
  struct Entry {
    at::Tensor host, on_device;
  };
  using Key = std::tuple<const void*, int, at::ScalarType>;
  static std::mutex lock;
  static auto& cache = *new std::map<Key, Entry>();
  constexpr size_t kMostTables = 16;  // a few per process; more means tables made per step
  const std::lock_guard<std::mutex> guard(lock);
  const Key key{host.unsafeGetTensorImpl(), device.index(), dtype};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMostTables) cache.clear();
    Entry entry{host, io::upload(host.to(dtype).contiguous(), device)};
    it = cache.emplace(key, std::move(entry)).first;
  }
  return it->second.on_device;
}

}  // namespace

DeviceConstraints upload_constraints(const std::vector<SlotConstraint>& constraints, int64_t vocab,
                                     at::Device device) {
  std::vector<int64_t> forced;
  std::vector<int32_t> mask_of_slot;
  std::vector<at::Tensor> masks;
  std::map<const void*, int32_t> row_of_mask;  // slots share the layout's one image mask
  for (const SlotConstraint& c : constraints) {
    if (c.forced >= vocab) {
      throw std::invalid_argument("cuda ops: a slot is forced to token " + std::to_string(c.forced) +
                                  ", past the vocabulary of " + std::to_string(vocab));
    }
    forced.push_back(c.forced);
    int32_t row = -1;
    if (c.forced < 0 && c.allowed.defined()) {
      if (c.allowed.numel() != vocab) {
        throw std::invalid_argument("cuda ops: a slot's allowed mask has " + std::to_string(c.allowed.numel()) +
                                    " entries, the vocabulary " + std::to_string(vocab));
      }
      const void* key = c.allowed.unsafeGetTensorImpl();
      auto it = row_of_mask.find(key);
      if (it == row_of_mask.end()) {
        it = row_of_mask.emplace(key, static_cast<int32_t>(masks.size())).first;
        masks.push_back(cached_upload(c.allowed, at::kBool, device).view(at::kByte));  // nonzero allows, as on the CPU
      }
      row = it->second;
    }
    mask_of_slot.push_back(row);
  }
  io::StepUpload up;
  return send_constraints(up, forced, mask_of_slot, masks, device);
}

DeviceConstraints send_constraints(io::StepUpload& upload, const std::vector<int64_t>& forced,
                                   const std::vector<int32_t>& mask_of_slot, const std::vector<at::Tensor>& masks,
                                   at::Device device) {
  const size_t forced_d = upload.add(forced);
  const size_t mask_of_slot_d = upload.add(mask_of_slot);
  upload.send(device);
  DeviceConstraints out;
  out.forced = upload.tensor(forced_d, at::kLong);
  out.mask_of_slot = upload.tensor(mask_of_slot_d, at::kInt);
  if (!masks.empty()) out.masks = masks.size() == 1 ? masks[0].unsqueeze(0) : at::stack(masks);
  return out;
}

at::Tensor run_logits_pipeline(const at::Tensor& logits, const DeviceConstraints& constraints,
                               const PipelineSettings& settings) {
  require_cuda(logits, "logits");
  if (logits.dim() != 3 || logits.size(1) != constraints.forced.numel()) {
    throw std::invalid_argument("cuda logits pipeline: expected [rows, " + std::to_string(constraints.forced.numel()) +
                                ", V] logits, got " + std::to_string(logits.dim()) + " dims");
  }
  const c10::cuda::CUDAGuard guard(logits.device());  // kernels launch on the current device
  const at::Tensor x = logits.to(at::kFloat).contiguous();
  at::Tensor probs = at::empty({x.size(1), x.size(2)}, x.options());
  kernels::PipelineArgs a;
  a.logits = x.data_ptr<float>();
  a.rows = static_cast<int>(x.size(0));
  a.slots = static_cast<int>(x.size(1));
  a.vocab = x.size(2);
  a.forced = constraints.forced.data_ptr<int64_t>();
  a.masks = constraints.masks.defined() ? constraints.masks.data_ptr<uint8_t>() : nullptr;
  a.mask_of_slot = constraints.mask_of_slot.data_ptr<int32_t>();
  a.cfg_scale = static_cast<float>(settings.cfg_scale);
  a.cfg_on_log_probs = settings.cfg_mix == CfgMix::kLogProbs;
  a.temperature = static_cast<float>(settings.temperature);
  a.top_k = settings.top_k;
  a.probs = probs.data_ptr<float>();
  kernels::launch_logits_pipeline(a, stream_of(x));
  return probs;
}

DeviceRelaxation upload_relaxation(const Relaxation& relax, int window, at::Device device) {
  DeviceRelaxation out;
  std::vector<double> weights(static_cast<size_t>(window) + 1);
  for (int d = 0; d <= window; ++d) weights[static_cast<size_t>(d)] = relaxation_weight(relax, d + 1, window);
  io::StepUpload up;
  const size_t weights_d = up.add(weights);
  up.send(device);
  out.weights = up.tensor(weights_d, at::kDouble);
  out.args.weights = out.weights.data_ptr<double>();
  switch (relax.kind) {
    case RelaxKind::kNone: out.args.kind = kernels::kRelaxNone; break;
    case RelaxKind::kUniform: out.args.kind = kernels::kRelaxUniform; break;
    case RelaxKind::kCool: out.args.kind = kernels::kRelaxCool; break;
    case RelaxKind::kLantern: out.args.kind = kernels::kRelaxLantern; break;
  }
  if (relax.kind == RelaxKind::kLantern && relax.neighbours.defined()) {
    out.neighbours = cached_upload(relax.neighbours, at::kLong, device);
    out.args.neighbours = out.neighbours.data_ptr<int64_t>();
    out.args.neighbour_rows = out.neighbours.size(0);
    out.args.neighbour_cols = out.neighbours.size(1);
    if (std::min<int64_t>(relax.lantern_k, out.args.neighbour_cols) > kernels::kMaxLanternNeighbours) {
      throw std::invalid_argument("cuda ops: --lantern-k above " + std::to_string(kernels::kMaxLanternNeighbours) +
                                  " is not supported on the device");
    }
  }
  out.args.lantern_k = relax.lantern_k;
  out.args.lantern_lambda = relax.lantern_lambda;
  out.args.lantern_own_residual = relax.lantern_own_residual;
  return out;
}

ChainVerdicts verify_chain(const at::Tensor& probs, const ChainDrafts& drafts, kernels::TailDraw tail,
                           const StepKeys& keys, const DeviceRelaxation& relax) {
  const int chain = static_cast<int>(drafts.tokens.size());
  require_probs(probs, chain + 1);
  const c10::cuda::CUDAGuard guard(probs.device());
  if (drafts.q.size() != drafts.tokens.size()) throw std::invalid_argument("cuda ops: one q per draft token expected");
  const at::Device device = probs.device();
  const int64_t vocab = probs.size(1);
  // The inputs and the outputs' initial values in one upload.
  io::StepUpload up;
  const size_t tokens = up.add(or_placeholder(drafts.tokens, int64_t{0}));
  const size_t q_rows = up.add(row_addresses(drafts.q, vocab, device, "draft q"));
  const size_t accepted = up.add_filled<uint8_t>(static_cast<size_t>(std::max(chain, 1)), 0);
  const size_t mrs_token = up.add_filled<int64_t>(static_cast<size_t>(std::max(chain, 1)), -1);
  const size_t tail_token = up.add_filled<int64_t>(static_cast<size_t>(chain) + 1, -1);
  up.send(device);
  ChainVerdicts out;
  out.accepted = up.tensor(accepted, at::kByte);
  out.mrs_token = up.tensor(mrs_token, at::kLong);
  out.tail_token = up.tensor(tail_token, at::kLong);
  kernels::ChainArgs a;
  a.probs = probs.data_ptr<float>();
  a.vocab = vocab;
  a.chain = chain;
  a.draft_tokens = up.data<int64_t>(tokens);
  a.draft_q = as_rows(up, q_rows);
  a.tail = tail;
  a.step = step_info(keys);
  a.relax = relax.args;
  a.accepted = out.accepted.data_ptr<uint8_t>();
  a.mrs_token = out.mrs_token.data_ptr<int64_t>();
  a.tail_token = out.tail_token.data_ptr<int64_t>();
  kernels::launch_verify_chain(a, stream_of(probs));
  out.accepted = out.accepted.narrow(0, 0, chain);
  out.mrs_token = out.mrs_token.narrow(0, 0, chain);
  return out;
}

at::Tensor sample_slots(const at::Tensor& probs, const std::vector<int32_t>& depth, const StepKeys& keys) {
  const int slots = static_cast<int>(depth.size());
  require_probs(probs, slots);
  const c10::cuda::CUDAGuard guard(probs.device());
  io::StepUpload up;
  const size_t depth_d = up.add(or_placeholder(depth, int32_t{0}));
  const size_t token = up.add_filled<int64_t>(static_cast<size_t>(std::max(slots, 1)), -1);
  up.send(probs.device());
  const at::Tensor out = up.tensor(token, at::kLong);
  kernels::SampleArgs a;
  a.probs = probs.data_ptr<float>();
  a.vocab = probs.size(1);
  a.slots = slots;
  a.depth = up.data<int32_t>(depth_d);
  a.step = step_info(keys);
  a.token = out.data_ptr<int64_t>();
  kernels::launch_sample_slots(a, stream_of(probs));
  return out.narrow(0, 0, slots);
}

TreeVerdicts verify_tree(const at::Tensor& probs, const std::vector<TreeLevelInput>& levels,
                         const std::vector<int32_t>& slot, const std::vector<int32_t>& depth, const StepKeys& keys,
                         const DeviceRelaxation& relax) {
  require_probs(probs, 1);
  const c10::cuda::CUDAGuard guard(probs.device());
  if (slot.size() != depth.size()) throw std::invalid_argument("cuda ops: one depth per verified slot expected");
  const at::Device device = probs.device();
  const int64_t vocab = probs.size(1);
  const int count = static_cast<int>(slot.size());
  int max_candidates = 1;
  for (const auto& level : levels)
    max_candidates = std::max<int>(max_candidates, static_cast<int>(level.candidates.size()));
  std::vector<int64_t> candidates(levels.size() * static_cast<size_t>(max_candidates), -1);
  std::vector<int32_t> candidate_count;
  std::vector<at::Tensor> q;
  for (size_t d = 0; d < levels.size(); ++d) {
    std::copy(levels[d].candidates.begin(), levels[d].candidates.end(),
              candidates.begin() + static_cast<std::ptrdiff_t>(d * static_cast<size_t>(max_candidates)));
    candidate_count.push_back(static_cast<int32_t>(levels[d].candidates.size()));
    q.push_back(levels[d].q);
  }
  for (size_t i = 0; i < slot.size(); ++i) {
    if (slot[i] < 0 || slot[i] >= probs.size(0) || depth[i] < 0 || depth[i] >= static_cast<int32_t>(levels.size())) {
      throw std::invalid_argument("cuda ops: tree entry " + std::to_string(i) + " names slot " +
                                  std::to_string(slot[i]) + " at depth " + std::to_string(depth[i]) +
                                  ", outside the window");
    }
  }
  io::StepUpload up;
  const size_t q_rows = up.add(row_addresses(q, vocab, device, "tree level q"));
  const size_t candidates_d = up.add(or_placeholder(candidates, int64_t{-1}));
  const size_t count_d = up.add(or_placeholder(candidate_count, int32_t{0}));
  const size_t slot_d = up.add(or_placeholder(slot, int32_t{0}));
  const size_t depth_d = up.add(or_placeholder(depth, int32_t{0}));
  const size_t accepted = up.add_filled<int32_t>(static_cast<size_t>(std::max(count, 1)), -1);
  const size_t token = up.add_filled<int64_t>(static_cast<size_t>(std::max(count, 1)), -1);
  const size_t listed = up.add_filled<int32_t>(static_cast<size_t>(std::max(count, 1)), -1);
  up.send(device);
  const at::Tensor scratch = at::empty({std::max(count, 1), 3, vocab}, probs.options());
  TreeVerdicts out;
  out.candidate = up.tensor(accepted, at::kInt);
  out.token = up.tensor(token, at::kLong);
  out.listed = up.tensor(listed, at::kInt);
  kernels::TreeArgs a;
  a.probs = probs.data_ptr<float>();
  a.vocab = vocab;
  a.count = count;
  a.slot = up.data<int32_t>(slot_d);
  a.depth = up.data<int32_t>(depth_d);
  a.level_q = as_rows(up, q_rows);
  a.candidates = up.data<int64_t>(candidates_d);
  a.candidate_count = up.data<int32_t>(count_d);
  a.max_candidates = max_candidates;
  a.step = step_info(keys);
  a.relax = relax.args;
  a.scratch = scratch.data_ptr<float>();
  // SJD_SPARSE_TREE_VERIFY=0 keeps every block on the whole vocabulary (device_check.sh turns it off when the
  // listed path's tests fail, and times both). Read once, as the other switches.
  static const bool list_support = [] {
    const char* sparse = std::getenv("SJD_SPARSE_TREE_VERIFY");
    return sparse == nullptr || std::string(sparse) != "0";
  }();
  a.list_support = list_support;
  a.accepted_candidate = out.candidate.data_ptr<int32_t>();
  a.token = out.token.data_ptr<int64_t>();
  a.listed = out.listed.data_ptr<int32_t>();
  kernels::launch_verify_tree(a, stream_of(probs));
  out.candidate = out.candidate.narrow(0, 0, count);
  out.token = out.token.narrow(0, 0, count);
  out.listed = out.listed.narrow(0, 0, count);
  return out;
}

at::Tensor draw_candidates(const std::vector<at::Tensor>& q, const std::vector<int64_t>& position,
                           const std::vector<int64_t>& exclude, int want, const std::vector<StepKeys>& keys) {
  if (q.empty()) return at::empty({0, std::max(want, 0)}, at::kLong);
  if (position.size() != q.size() || exclude.size() != q.size() || keys.size() != q.size()) {
    throw std::invalid_argument("cuda ops: draw_candidates needs one position, excluded token and key per q");
  }
  if (want > kernels::kMaxCandidates) {
    throw std::invalid_argument("cuda ops: at most " + std::to_string(kernels::kMaxCandidates) +
                                " candidates per position on the device (asked " + std::to_string(want) + ")");
  }
  const at::Device device = q.front().device();
  const c10::cuda::CUDAGuard guard(device);
  const int64_t vocab = q.front().numel();
  std::vector<kernels::StepInfo> steps;
  for (const StepKeys& k : keys) steps.push_back(step_info(k));
  io::StepUpload up;
  const size_t q_rows = up.add(row_addresses(q, vocab, device, "candidate q"));
  const size_t position_d = up.add(position);
  const size_t exclude_d = up.add(exclude);
  const size_t steps_d = up.add(steps);
  const size_t drawn = up.add_filled<int64_t>(q.size() * static_cast<size_t>(std::max(want, 1)), -1);
  up.send(device);
  kernels::CandidateArgs a;
  a.q = as_rows(up, q_rows);
  a.vocab = vocab;
  a.count = static_cast<int>(q.size());
  a.position = up.data<int64_t>(position_d);
  a.exclude = up.data<int64_t>(exclude_d);
  a.want = want;
  a.steps = up.data<kernels::StepInfo>(steps_d);
  a.out = up.data<int64_t>(drawn);
  kernels::launch_draw_candidates(a, stream_of(q.front()));
  const at::Tensor rows = up.tensor(drawn, at::kLong).view({static_cast<int64_t>(q.size()), std::max(want, 1)});
  return rows.narrow(1, 0, std::max(want, 0));
}

at::Tensor sample_rows(const std::vector<at::Tensor>& q, const std::vector<kernels::PhiloxStream>& streams) {
  if (q.empty()) return at::empty({0}, at::kLong);
  if (streams.size() != q.size()) throw std::invalid_argument("cuda ops: sample_rows needs one stream per q");
  const at::Device device = q.front().device();
  const c10::cuda::CUDAGuard guard(device);
  io::StepUpload up;
  const size_t q_rows = up.add(row_addresses(q, q.front().numel(), device, "sampled q"));
  const size_t streams_d = up.add(streams);
  const size_t token = up.add_filled<int64_t>(q.size(), -1);
  up.send(device);
  kernels::RowSampleArgs a;
  a.q = as_rows(up, q_rows);
  a.vocab = q.front().numel();
  a.count = static_cast<int>(q.size());
  a.streams = up.data<kernels::PhiloxStream>(streams_d);
  a.token = up.data<int64_t>(token);
  kernels::launch_sample_rows(a, stream_of(q.front()));
  return up.tensor(token, at::kLong);
}

at::Tensor queue_window(const at::Tensor& probs, const WindowSpec& w, const StepKeys& keys,
                        const DeviceRelaxation& relax) {
  const int slots = 1 + static_cast<int>(w.node_tokens.size());
  require_probs(probs, slots);
  const c10::cuda::CUDAGuard guard(probs.device());
  if (static_cast<int>(w.drafts.tokens.size()) != w.chain || w.node_depth.size() != w.node_tokens.size()) {
    throw std::invalid_argument("cuda ops: window of " + std::to_string(w.chain) + " spine drafts has " +
                                std::to_string(w.drafts.tokens.size()) + " draft tokens");
  }
  const at::Device device = probs.device();
  const ChainVerdicts chain = verify_chain(probs, w.drafts, w.tail, keys, relax);

  std::vector<int32_t> depth = {0};
  for (int d : w.node_depth) depth.push_back(d);
  const at::Tensor sampled = sample_slots(probs, depth, keys);

  // Tree levels: every slot whose depth has a level of several candidates, and every off-spine slot
  // (a node past the chain) above any level: off the spine the walk goes on through levels of one candidate.
  const int levels = static_cast<int>(w.levels.size());
  std::vector<int32_t> tree_slot, tree_depth, tree_index_of_slot(static_cast<size_t>(slots), -1);
  for (int s = 0; s < slots; ++s) {
    const int d = depth[static_cast<size_t>(s)];
    if (d < levels && (w.levels[static_cast<size_t>(d)].candidates.size() > 1 || s > w.chain)) {
      tree_index_of_slot[static_cast<size_t>(s)] = static_cast<int32_t>(tree_slot.size());
      tree_slot.push_back(s);
      tree_depth.push_back(d);
    }
  }
  // A chain window (or a tree whose levels this window's slots do not reach) has no tree verdicts:
  // its uploads, fills and launch are skipped (the walk reads them only at a slot of tree_slot).
  const TreeVerdicts tree =
      tree_slot.empty() ? TreeVerdicts{} : verify_tree(probs, w.levels, tree_slot, tree_depth, keys, relax);

  int max_candidates = 1;
  std::vector<int32_t> level_size;
  for (const auto& level : w.levels) {
    level_size.push_back(static_cast<int32_t>(level.candidates.size()));
    max_candidates = std::max<int>(max_candidates, static_cast<int>(level.candidates.size()));
  }
  std::vector<int32_t> child_of(static_cast<size_t>(slots) * static_cast<size_t>(max_candidates), -1);
  for (size_t s = 0; s < w.child_of.size() && s < static_cast<size_t>(slots); ++s) {
    for (size_t k = 0; k < w.child_of[s].size() && k < static_cast<size_t>(max_candidates); ++k) {
      child_of[s * static_cast<size_t>(max_candidates) + k] = w.child_of[s][k];
    }
  }
  io::StepUpload up;
  const size_t level_size_d = up.add(or_placeholder(level_size, int32_t{0}));
  const size_t node_token_d = up.add(or_placeholder(w.node_tokens, int64_t{0}));
  const size_t child_of_d = up.add(child_of);
  const size_t tree_index_d = up.add(tree_index_of_slot);
  const size_t packed_d = up.add_filled<int64_t>(static_cast<size_t>(kernels::walk_packed_size(w.chain)), 0);
  up.send(device);
  const at::Tensor packed = up.tensor(packed_d, at::kLong);

  kernels::WalkArgs a;
  a.chain = w.chain;
  a.levels = levels;
  a.level_size = up.data<int32_t>(level_size_d);
  a.node_token = up.data<int64_t>(node_token_d);
  a.child_of = up.data<int32_t>(child_of_d);
  a.max_candidates = max_candidates;
  a.tree_index_of_slot = up.data<int32_t>(tree_index_d);
  a.tree_candidate =
      tree.candidate.defined() && tree.candidate.numel() > 0 ? tree.candidate.data_ptr<int32_t>() : nullptr;
  a.tree_token = tree.token.defined() && tree.token.numel() > 0 ? tree.token.data_ptr<int64_t>() : nullptr;
  a.accepted = chain.accepted.numel() > 0 ? chain.accepted.data_ptr<uint8_t>() : nullptr;
  a.mrs_token = chain.mrs_token.numel() > 0 ? chain.mrs_token.data_ptr<int64_t>() : nullptr;
  a.tail_token = chain.tail_token.data_ptr<int64_t>();
  a.sample_token = sampled.data_ptr<int64_t>();
  a.step = step_info(keys);
  a.packed = packed.data_ptr<int64_t>();
  kernels::launch_window_walk(a, stream_of(probs));
  return packed;
}

WindowResult verify_window(const at::Tensor& probs, const WindowSpec& w, const StepKeys& keys,
                           const DeviceRelaxation& relax) {
  return unpack_window(queue_window(probs, w, keys, relax).to(at::kCPU), w.chain);
}

}  // namespace sjd::sampling::cuda

#endif  // SJD_WITH_CUDA
