#include "decoding/decoder.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include <c10/core/InferenceMode.h>

#include "decoding/device_verifier.h"
#include "decoding/sequence_decoder.h"
#include "decoding/step_timer.h"
#include "io/device_transfer.h"
#include "sampling/tensor_draws.h"

namespace sjd::decoding {
namespace {

using Clock = std::chrono::steady_clock;

void check_fits(const SequenceDecoder& sequence, const BatchCapacity& capacity) {
  const DecodeRequest& request = sequence.request();
  const std::string id = "request " + std::to_string(request.id);
  if (sequence.rows() != capacity.rows_per_sequence) {
    throw std::invalid_argument(id + " has " + std::to_string(sequence.rows()) + " rows; the batch was sized for " +
                                std::to_string(capacity.rows_per_sequence));
  }
  if (sequence.largest_window() > capacity.window_nodes) {
    throw std::invalid_argument(id + " may lay out " + std::to_string(sequence.largest_window()) +
                                " draft nodes; the batch was sized for " + std::to_string(capacity.window_nodes));
  }
  for (const auto& row : request.rows) {
    if (row.tokens.empty() || static_cast<int64_t>(row.tokens.size()) > capacity.prompt_tokens ||
        row.positions.size() != row.tokens.size() || row.positions.back() > capacity.prompt_position) {
      throw std::invalid_argument(id + ": a prompt row of " + std::to_string(row.tokens.size()) +
                                  " tokens does not fit the batch (at most " + std::to_string(capacity.prompt_tokens) +
                                  " tokens, positions up to " + std::to_string(capacity.prompt_position) + ")");
    }
  }
}

bool same_pipeline(const sampling::PipelineSettings& a, const sampling::PipelineSettings& b) {
  return a.cfg_scale == b.cfg_scale && a.cfg_mix == b.cfg_mix && a.temperature == b.temperature && a.top_k == b.top_k;
}

// Draws the sequences planned (planned[i]: sequence i's, in order), made together per
// verification device -- a GPU's in one kernel and one read for the whole batch -- with
// `draw_all`, then handed back to each sequence in order: take(i, its results).
template <typename Draw, typename DrawAll, typename Take>
void draw_together(const std::vector<SequenceDecoder*>& sequences, const std::vector<std::vector<Draw>>& planned,
                   const DrawAll& draw_all, const Take& take) {
  for (bool on_device : {true, false}) {
    std::vector<Draw> draws;
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (sequences[i]->verifies_on_device() == on_device)
        draws.insert(draws.end(), planned[i].begin(), planned[i].end());
    }
    const auto drawn = draw_all(draws);
    auto next = drawn.begin();
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (sequences[i]->verifies_on_device() != on_device) continue;
      const auto count = static_cast<std::ptrdiff_t>(planned[i].size());
      take(i, std::vector(next, next + count));
      next += count;
    }
  }
}

// SJD-PAC's next trees: the candidate draws of every sequence that planned one.
void grow_trees(const std::vector<SequenceDecoder*>& sequences) {
  std::vector<std::vector<sampling::CandidateDraw>> planned;
  for (SequenceDecoder* sequence : sequences) planned.push_back(sequence->tree_draws());
  draw_together(sequences, planned, sampling::draw_after,
                [&](size_t i, const std::vector<std::vector<int64_t>>& drawn) { sequences[i]->grow_tree(drawn); });
}

// Every sequence's next window, its initial drafts drawn from a stale p (sample-left/up) together.
std::vector<const model::DraftTree*> open_windows(const std::vector<SequenceDecoder*>& sequences) {
  std::vector<std::vector<sampling::RowDraw>> planned;
  for (SequenceDecoder* sequence : sequences) planned.push_back(sequence->plan_window());
  std::vector<const model::DraftTree*> windows(sequences.size());
  draw_together(sequences, planned, sampling::sample_each,
                [&](size_t i, const std::vector<int64_t>& drawn) { windows[i] = &sequences[i]->next_window(drawn); });
  return windows;
}

// Probabilities [1 + nodes, V] per sequence from the batch's logits [windows, width, V]
// (each sequence's rows in order), on the logits' device: one pipeline call for every
// run of sequences with the same pipeline settings. `columns`: the model's restricted head.
std::vector<at::Tensor> run_pipelines(const at::Tensor& logits, const std::vector<SequenceDecoder*>& sequences,
                                      const std::vector<int64_t>& columns) {
  std::vector<at::Tensor> probs;
  int64_t row = 0;
  for (size_t begin = 0; begin < sequences.size();) {
    const sampling::PipelineSettings& settings = sequences[begin]->request().pipeline;
    size_t end = begin;
    std::vector<at::Tensor> parts;
    std::vector<sampling::SlotConstraint> constraints;
    std::vector<int64_t> widths;
    for (; end < sequences.size() && same_pipeline(sequences[end]->request().pipeline, settings); ++end) {
      std::vector<sampling::SlotConstraint> own = sequences[end]->slot_constraints();
      const int64_t rows = sequences[end]->rows(), width = static_cast<int64_t>(own.size());
      parts.push_back(logits.narrow(0, row, rows).narrow(1, 0, width));
      constraints.insert(constraints.end(), own.begin(), own.end());
      widths.push_back(width);
      row += rows;
    }
    const at::Tensor joined = parts.size() == 1 ? parts[0] : at::cat(parts, 1);
    const at::Tensor all = sampling::run_logits_pipeline(joined, constraints, settings, columns);
    int64_t slot = 0;
    for (int64_t width : widths) {
      // Own storage per sequence: drafts keep rows of p for later steps, which must not pin the whole batch's.
      probs.push_back(widths.size() == 1 ? all : all.narrow(0, slot, width).clone());
      slot += width;
    }
    begin = end;
  }
  return probs;
}

// Where a sequence's windows are verified: on the model's GPU, unless the request asks for
// the CPU, a test mutant is on (they exist only in the CPU verifier) or the method is beyond
// the kernels' limits.
at::Device verification_device(const model::TokenModel& model, const DecodeRequest& request,
                               const Mutants& mutants) {
  const at::Device device = model.device();
  const bool on_device =
      device.is_cuda() && !request.verify_on_host && !mutants.any() && device_kernels_take(request.method);
  return on_device ? device : at::Device(at::kCPU);
}

}  // namespace

at::Tensor probabilities_to_host(const at::Tensor& probs) {
  if (probs.is_cpu()) return probs;
  // Page-locked memory: the copy runs at the link's full speed (into pageable memory it is staged
  // at a fraction of it). Freed blocks go back to Torch's caching host allocator, so after the
  // first steps no new page-locked memory is allocated; drafts' q's keep rows of theirs alive.
  at::Tensor host = at::empty(probs.sizes(), probs.options().device(at::kCPU).pinned_memory(true));
  return host.copy_(probs);  // waits for the copy
}

DecodeResult decode(model::TokenModel& model, const family::TokenLayout& layout, const DecodeRequest& request,
                    const Mutants& mutants) {
  BatchCapacity capacity;
  capacity.rows_per_sequence = static_cast<int>(request.rows.size());
  capacity.window_nodes = window_nodes(largest_window(request.method));
  for (const auto& row : request.rows) {
    if (row.tokens.empty()) throw std::invalid_argument("decode: a prompt row has no tokens");
    capacity.prompt_tokens = std::max<int64_t>(capacity.prompt_tokens, static_cast<int64_t>(row.tokens.size()));
    for (int64_t p : row.positions) capacity.prompt_position = std::max(capacity.prompt_position, p);
  }
  bool given = false;
  DecodeResult out;
  decode_batch(
      model, layout, capacity,
      [&]() -> std::optional<DecodeRequest> {
        if (given) return std::nullopt;
        given = true;
        return request;
      },
      [&](const DecodeRequest&, DecodeResult result) { out = std::move(result); }, mutants);
  return out;
}

void decode_batch(model::TokenModel& model, const family::TokenLayout& layout, const BatchCapacity& capacity,
                  const std::function<std::optional<DecodeRequest>()>& next,
                  const std::function<void(const DecodeRequest&, DecodeResult)>& finished, const Mutants& mutants) {
  // No autograd bookkeeping for the loop's small tensor ops (the pipeline, the verifier, the draft
  // book): each ATen call costs the host less (a row view a third as much, docs/benchmarks.md).
  c10::InferenceMode inference_mode;
  const int64_t rows_per_sequence = capacity.rows_per_sequence;
  const int64_t slots = std::max(capacity.sequences, 1);
  // Every row holds its prompt, the generated tokens and one window after the last root, as wide
  // as the model lays it out (a graphed step pads it: without the room, a batch with any row near
  // its end would step eagerly).
  const int64_t tail = layout.length() + model.window_slots(capacity.window_nodes + 1);
  model.restrict_outputs(layout.emittable());
  model.reserve(slots * rows_per_sequence, capacity.prompt_tokens + tail, capacity.prompt_position + tail);

  // live[s] decodes in cache rows s * rows_per_sequence ...; empty once the source runs dry.
  std::vector<std::unique_ptr<SequenceDecoder>> live(static_cast<size_t>(slots));
  const auto refill = [&](int64_t slot) {
    std::optional<DecodeRequest> request = next();
    if (!request) return;
    const auto t0 = Clock::now();
    const at::Device verify_on = verification_device(model, *request, mutants);
    auto sequence = std::make_unique<SequenceDecoder>(layout, std::move(*request), mutants, verify_on);
    check_fits(*sequence, capacity);
    for (int64_t r = 0; r < rows_per_sequence; ++r) {
      model.open_row(slot * rows_per_sequence + r, sequence->request().rows[static_cast<size_t>(r)]);
    }
    // Once per sequence, a GPU's queued prefill is waited for: its time is the prefill's, not the
    // next step's (whose timer starts when the device reaches it).
    io::synchronize(model.device());
    sequence->add_prefill_seconds(seconds_since(t0));
    live[static_cast<size_t>(slot)] = std::move(sequence);
  };
  for (int64_t s = 0; s < slots; ++s) refill(s);

  std::vector<model::RowWindow> windows;
  StepTimer timer(model.device());
  while (true) {
    // The live sequences in slot order.
    std::vector<SequenceDecoder*> order;
    std::vector<int64_t> slot_of;
    for (int64_t s = 0; s < slots; ++s) {
      if (!live[static_cast<size_t>(s)]) continue;
      order.push_back(live[static_cast<size_t>(s)].get());
      slot_of.push_back(s);
    }
    if (order.empty()) return;
    const std::vector<const model::DraftTree*> nodes = open_windows(order);
    windows.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      for (int64_t r = 0; r < rows_per_sequence; ++r) {
        windows.push_back({slot_of[i] * rows_per_sequence + r, order[i]->root(r), nodes[i]});
      }
    }
    // A GPU runs the forward and the pipeline queued; the host prepares the next phase meanwhile,
    // and waits only for the verification's read (StepTimer splits the time without waiting).
    timer.start();
    const at::Tensor logits = model.forward_rows(windows);
    timer.forward_queued();

    // One logits pipeline over every sequence's slots (its operations are per slot), then
    // each sequence verifies its own.
    const std::vector<at::Tensor> probs = run_pipelines(logits, order, model.output_ids());
    timer.pipeline_queued();

    // Every sequence verifies. A GPU's verifications are all queued first and their verdicts come
    // back in one read, the step's one wait for the device. Then the model keeps all rows' paths at
    // once (one move of the kept keys for the whole batch), then finished sequences hand over their slots.
    // Sequences verified on the device are queued before any host verification makes the host wait.
    std::vector<at::Tensor> verdicts(order.size()), queued;
    std::vector<size_t> queued_at;
    for (bool on_device : {true, false}) {
      for (size_t i = 0; i < order.size(); ++i) {
        if (order[i]->verifies_on_device() != on_device) continue;
        verdicts[i] = order[i]->verify_window(probs[i]);  // undefined where the CPU verified at once
        if (!verdicts[i].defined()) continue;
        queued.push_back(verdicts[i]);
        queued_at.push_back(i);
      }
    }
    const std::vector<at::Tensor> read = io::read_together(queued);
    for (size_t k = 0; k < read.size(); ++k) verdicts[queued_at[k]] = read[k];
    std::vector<model::RowPath> paths;
    for (size_t i = 0; i < order.size(); ++i) {
      const std::vector<int>& path = order[i]->finish_window(verdicts[i]);
      for (int64_t r = 0; r < rows_per_sequence; ++r) paths.push_back({slot_of[i] * rows_per_sequence + r, &path});
    }
    grow_trees(order);
    // The forward is every sequence's; the pipeline and a GPU's verification time are shared out.
    StepSeconds share = timer.finish();
    share.pipeline /= static_cast<double>(order.size());
    share.verify /= static_cast<double>(order.size());
    for (SequenceDecoder* sequence : order) sequence->charge_step(share, timer.host_timed());
    model.commit_rows(paths);
    for (int64_t s = 0; s < slots; ++s) {
      std::unique_ptr<SequenceDecoder>& sequence = live[static_cast<size_t>(s)];
      if (!sequence || !sequence->finished()) continue;
      finished(sequence->request(), sequence->take_result());
      sequence.reset();
      refill(s);
    }
  }
}

}  // namespace sjd::decoding
