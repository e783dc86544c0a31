// `sjd bench`: builds the preset's transformer with hashed random weights on
// the device, then times prefill, AR steps and window steps phase by phase,
// each phase run to completion (synchronised) so the shares add up.
#include "engine/bench.h"

#include <c10/core/InferenceMode.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <limits>
#include <set>
#include <sstream>

#include "decoding/device_verifier.h"
#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "decoding/window_planner.h"
#include "decoding/window_verifier.h"
#include "engine/bench_profile.h"
#include "family/token_layout.h"
#include "io/device_transfer.h"
#include "io/png_writer.h"
#include "model/transformer.h"
#include "sampling/logits_pipeline.h"
#include "vq/vq_decoder.h"

namespace sjd::engine {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double timed_ms(const at::Device& device, F&& work) {
  io::synchronize(device);
  const auto start = Clock::now();
  work();
  io::synchronize(device);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Seconds to write `rgb` (uint8 [H, W, 3]) as a PNG with the text a generation records, the faster of
// two writes into the system's temporary folder (the file is removed); -1 where that folder takes none.
double png_write_seconds(const at::Tensor& rgb) {
  std::filesystem::path file;
  double best = -1.0;
  try {
    file = std::filesystem::temp_directory_path() / ("sjd-bench-" + std::to_string(::getpid()) + ".png");
    for (int i = 0; i < 2; ++i) {
      const auto start = Clock::now();
      io::write_png(file, rgb, {{"prompt", "sjd bench"}, {"Software", "sjd"}});
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      best = best < 0 ? seconds : std::min(best, seconds);
    }
  } catch (const std::exception&) {  // an unwritable temporary folder: the figure is left out
  }
  std::error_code ignored;
  if (!file.empty()) std::filesystem::remove(file, ignored);
  return best;
}

// A prompt row of `length` arbitrary tokens at positions 0..length-1.
model::RowPrompt prompt_row(int64_t length, int64_t vocab, int64_t offset) {
  model::RowPrompt row;
  for (int64_t i = 0; i < length; ++i) {
    row.tokens.push_back((i * 7919 + offset) % vocab);
    row.positions.push_back(i);
    row.key_valid.push_back(1);
  }
  return row;
}

// Bytes read + written per second by a plain device copy of a large buffer.
double copy_bandwidth(const at::Device& device) {
  const int64_t bytes = device.is_cpu() ? (int64_t{64} << 20) : (int64_t{1} << 30);
  const auto options = at::TensorOptions().dtype(at::kByte).device(device);
  const at::Tensor source = at::ones({bytes}, options);
  at::Tensor target = at::empty({bytes}, options);
  target.copy_(source);  // warm-up
  const int repeats = 5;
  const double ms = timed_ms(device, [&] {
    for (int i = 0; i < repeats; ++i) target.copy_(source);
  });
  return 2.0 * static_cast<double>(bytes) * repeats / (ms * 1e-3) / 1e9;
}

int64_t weight_bytes(const model::TransformerWeights& w, bool include_embedding) {
  int64_t total = w.norm.nbytes() + w.lm_head.nbytes() + (include_embedding ? w.embed.nbytes() : 0);
  for (const auto& l : w.layers) {
    for (const at::Tensor* t : {&l.attn_norm, &l.qkv, &l.o, &l.qk_norm_w, &l.qk_norm_b, &l.mlp_norm, &l.gate_up,
                                &l.down}) {
      if (t->defined()) total += t->nbytes();
    }
  }
  return total;
}

// One step kind, set up once at mid-image and run repeatedly: the drafts, the
// window and its constraints stay fixed; each phase runs what the decoding loop runs.
class StepFixture {
 public:
  // `tree`: the window also holds a proactive draft tree of that shape (sjd-pac's window after a rejection).
  StepFixture(model::Transformer& model, const BenchPreset& preset, const family::TokenLayout& layout, int window,
              const Placement& placement, uint64_t seed, decoding::WindowShape tree = {})
      : model_(model), layout_(layout), placement_(placement), seed_(seed), window_(window) {
    // Coupling (scd-mc): the heaviest chain verification; sjd-pac for a tree.
    method_ = decoding::make_method(window == 0 ? "ar" : tree.tree_k > 1 ? "sjd-pac" : "scd-mc");
    method_.window = window;
    settings_.cfg_scale = preset.cfg;
    settings_.cfg_mix = preset.cfg_mix;
    settings_.top_k = preset.top_k;
    first_ = layout.length() / 2;
    for (int64_t t = 0; t < first_; ++t)
      committed_.push_back(layout.first_code_id() + (t * 31) % layout.codebook_size());
    // The book where the decoding loop keeps it: on the GPU, whose verifier then runs there.
    book_ = std::make_unique<decoding::DraftBook>(layout, method_, decoding::Mutants{}, seed, 0, placement.device);
    book_->fill(committed_, window, 0);
    if (tree.tree_k > 1) book_->grow_tree(tree.tree_k, tree.tree_depth, 0);
    decoding::build_window(*book_, window, nodes_, child_of_);
    constraints_.push_back(layout.constraint(first_));
    for (size_t i = 0; i < nodes_.size(); ++i) constraints_.push_back(layout.constraint(first_ + nodes_.depth[i]));
    for (int i = 0; i < std::min(window, 4); ++i) path_.push_back(i);  // a typical accepted run on the spine
  }

  // One whole step as the decoding loop runs it, its phases queued (the profiler's steps; queued_ms).
  void step(int i) {
    const std::vector<int64_t> roots(static_cast<size_t>(model_.cache().rows()), committed_.back());
    verify(pipeline(model_.forward_rows(model::shared_window(roots, nodes_))), static_cast<uint32_t>(i));
    model_.commit(path_);
    model_.rollback(static_cast<int64_t>(path_.size()) + 1);
  }

  StepTiming run(int iterations, int warmup) {
    StepTiming sum;
    sum.window = window_;
    sum.nodes = static_cast<int>(nodes_.size());
    const std::vector<int64_t> roots(static_cast<size_t>(model_.cache().rows()), committed_.back());
    for (int i = 0; i < warmup + iterations; ++i) {
      at::Tensor logits, probs;
      StepTiming t;
      t.forward_ms =
          timed_ms(placement_.device, [&] { logits = model_.forward_rows(model::shared_window(roots, nodes_)); });
      t.pipeline_ms = timed_ms(placement_.device, [&] { probs = pipeline(logits); });
      t.verify_ms = timed_ms(placement_.device, [&] { verify(probs, static_cast<uint32_t>(i)); });
      t.kv_ms = timed_ms(placement_.device, [&] {
        model_.commit(path_);
        model_.rollback(static_cast<int64_t>(path_.size()) + 1);
      });
      if (i < warmup) continue;
      sum.forward_ms += t.forward_ms / iterations;
      sum.pipeline_ms += t.pipeline_ms / iterations;
      sum.verify_ms += t.verify_ms / iterations;
      sum.kv_ms += t.kv_ms / iterations;
    }
    // The queued step has its own warm-up: it keeps more uploads in flight than one phase at a
    // time did, and their first page-locked blocks are slow to allocate.
    const int queued_first = warmup + iterations;
    for (int i = 0; i < warmup; ++i) step(queued_first + i);
    for (int i = 0; i < iterations; ++i) {
      sum.queued_ms += timed_ms(placement_.device, [&] { step(queued_first + warmup + i); }) / iterations;
    }
    sum.attention = model_.attention_backend();
    return sum;
  }

 private:
  // What the decoding loop runs: on a GPU the fused kernel (constraints uploaded per step, as there).
  at::Tensor pipeline(const at::Tensor& logits) {
    return sampling::run_logits_pipeline(logits, constraints_, settings_, model_.output_ids());
  }

  // AR: the sample; a window: the whole verification, with the host reading its outcome. The
  // decoding loop's verifiers: DeviceVerifier on a GPU (the kernels, one small read), else the CPU's.
  void verify(const at::Tensor& probs, uint32_t step) {
    const decoding::WindowInput input{first_, layout_.length(), window_, &nodes_, &child_of_, probs, step};
    decoding::DraftBook book = *book_;  // verification moves the book on; every repetition starts alike
    if (!placement_.device.is_cpu()) {
      device_verifier_.verify(input, book);  // AR (method "ar"): the root's sample
      return;
    }
    const decoding::WindowVerifier verifier(method_, decoding::Mutants{}, seed_, 0);
    if (window_ == 0) verifier.sample_one(input); else verifier.verify(input, book);
  }

  model::Transformer& model_;
  const family::TokenLayout& layout_;
  Placement placement_;
  uint64_t seed_;
  int window_;
  decoding::MethodConfig method_;
  sampling::PipelineSettings settings_;
  int64_t first_ = 0;
  std::vector<int64_t> committed_;
  std::unique_ptr<decoding::DraftBook> book_;
  model::DraftTree nodes_;
  std::vector<std::vector<int>> child_of_;
  std::vector<sampling::SlotConstraint> constraints_;
  std::vector<int> path_;
  decoding::DeviceVerifier device_verifier_{method_, seed_, 0};
};

// The papers' step compression (docs/models.md) at the tool's default windows.
struct PaperMethod {
  const char* name;
  double compression;
  int window;
};
constexpr PaperMethod kPaperMethods[] = {{"ar", 1.0, 0}, {"sjd", 2.2, 16}, {"scd", 4.2, 16}, {"sjd-pac", 4.5, 64}};

// sjd with an automatic window: what the bench plans windows for.
decoding::MethodConfig auto_sjd() {
  decoding::MethodConfig sjd = decoding::make_method("sjd");
  sjd.auto_window = true;
  return sjd;
}

// The CFG pair of prompt rows of `length` tokens each.
std::vector<model::RowPrompt> cfg_rows(int64_t length, int64_t vocab) {
  return {prompt_row(length, vocab, 1), prompt_row(length, vocab, 2)};
}

// Each paper method's image time from its step compression and the measured step of its window.
void estimate_methods(BenchReport& report) {
  const double vq_seconds = std::max(report.vq_seconds, 0.0);
  for (const auto& m : kPaperMethods) {
    MethodEstimate e;
    e.method = m.name;
    e.step_compression = m.compression;
    e.window = m.window;
    e.steps = static_cast<int64_t>(std::ceil(static_cast<double>(report.preset.generated_tokens) / m.compression));
    double step_ms = report.ar.step_ms();
    for (const auto& t : report.windows) {
      if (t.window == m.window) step_ms = t.step_ms();
    }
    e.seconds = report.prefill_seconds + static_cast<double>(e.steps) * step_ms / 1e3 + vq_seconds;
    report.methods.push_back(e);
  }
}

// What --window auto would start from on this device: the measured steps as a step-cost profile,
// the planner's prior acceptance (no image seen yet), CFG batch 2.
void plan_auto_window(BenchReport& report, int64_t image_tokens) {
  std::vector<std::pair<int, double>> points = {{1, report.ar.step_ms()}};
  for (const auto& t : report.windows) points.emplace_back(t.window + 1, std::max(t.step_ms(), points.back().second));
  report.step_cost = decoding::StepCostProfile(
      report.preset.name + " " + report.device + "-" + report.dtype + " (bench)", 2, std::move(points));
  report.auto_chain =
      decoding::WindowPlanner(auto_sjd(), report.step_cost, 2).next(false, static_cast<int>(image_tokens)).chain;
}

// The batch axis at `batch` prompts: their CFG pairs in one forward at mid-image, the AR step and a
// BatchTiming::kBatchWindow chain, and the window the planner would choose from those two steps.
BatchTiming time_batch(model::Transformer& model, const BenchOptions& options, const BenchReport& report,
                       const family::TokenLayout& layout, int batch) {
  const BenchPreset& preset = report.preset;
  const int64_t half = layout.length() / 2;
  std::vector<model::RowPrompt> batch_rows;
  for (int i = 0; i < batch; ++i) {
    for (const auto& row : cfg_rows(preset.prompt_tokens + half, preset.transformer.vocab_size)) {
      batch_rows.push_back(row);
    }
  }
  // Each batch size on a cache of its own, sized as a generation sizes it (the rest of the image
  // and the batch window): a cache kept from the fixtures above would be larger, and a graphed
  // step reads its whole capacity. Its graph count is then this batch size's alone.
  model.release_cache();
  model.start(batch_rows, layout.length() - half, BatchTiming::kBatchWindow);
  const std::vector<int64_t> roots(batch_rows.size(), preset.first_code_id);
  model::DraftTree chain;
  for (int i = 0; i < BatchTiming::kBatchWindow; ++i) chain.push(preset.first_code_id + i, i - 1);
  const at::Device device = options.placement.device;
  const auto forward_ms = [&](const model::DraftTree& nodes) {
    const auto windows = model::shared_window(roots, nodes);
    for (int i = 0; i < options.warmup; ++i) model.forward_rows(windows);
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < options.iterations; ++i) {
      best = std::min(best, timed_ms(device, [&] { model.forward_rows(windows); }));
    }
    return best;
  };
  BatchTiming t;
  t.batch = batch;
  t.ar_ms = forward_ms(model::DraftTree{});
  t.window_ms = forward_ms(chain);
  t.graphs = model.captured_step_graphs();
  // Planned on this batch's own two measured points (the batch-1 curve scaled would misjudge
  // both the AR step and the window: every row's attention reads its own KV cache).
  std::vector<decoding::StepCostCurve> curves = report.step_cost.curves();
  if (batch > 1) {
    curves.push_back({2 * batch, {{1, t.ar_ms}, {1 + BatchTiming::kBatchWindow, std::max(t.window_ms, t.ar_ms)}}});
  }
  const decoding::StepCostProfile batch_cost(report.step_cost.name(), std::move(curves));
  t.auto_chain =
      decoding::WindowPlanner(auto_sjd(), batch_cost, 2 * batch).next(false, static_cast<int>(layout.length())).chain;
  return t;
}

// Last, so that no profiler state is left in the figures: the AR step, the widest chain window and
// the tree window at mid-image again, each warmed up first (and their graphs captured again, the
// batch axis having rebuilt the cache).
void profile_bench_steps(model::Transformer& model, const BenchOptions& options, BenchReport& report,
                         const family::TokenLayout& layout, int widest, const decoding::WindowShape& tree,
                         int longest) {
  const BenchPreset& preset = report.preset;
  const int64_t half = layout.length() / 2;
  model.start(cfg_rows(preset.prompt_tokens + half, preset.transformer.vocab_size), layout.length() - half, longest);
  const auto profile = [&](const std::string& label, const std::string& file, int window,
                           decoding::WindowShape shape) {
    StepFixture fixture(model, preset, layout, window, options.placement, options.seed, shape);
    for (int i = 0; i <= options.warmup; ++i) fixture.step(i);
    // A profiler that fails (CUPTI, the trace file) costs its profile, not the bench's figures.
    try {
      report.profiles.push_back(profile_steps(label, options.placement.device, options.profile_steps,
                                              [&](int i) { fixture.step(i); },
                                              options.profile_dir + "/" + preset.name + "-" + file + ".trace.json"));
    } catch (const std::exception& e) {
      report.profile_failures.push_back(label + ": " + e.what());
    }
  };
  profile("ar", "ar", 0, {});
  profile("L=" + std::to_string(widest), "L" + std::to_string(widest), widest, {});
  profile("tree L=" + std::to_string(tree.chain), "tree", tree.chain, tree);
}

}  // namespace

BenchReport run_bench(const BenchOptions& options) {
  c10::InferenceMode inference_mode;  // as a generation's decode loop runs: no autograd bookkeeping per call
  BenchReport report;
  report.preset = bench_preset(options.preset);
  const BenchPreset& preset = report.preset;
  check_bench_options(options, preset);
  const Placement& placement = options.placement;
  const at::Device device = placement.device;
  report.device = device_name(device);
  report.dtype = dtype_name(placement.dtype);
#ifdef SJD_WITH_CUDA
  report.pipeline_backend = device.is_cpu() ? "cpu reference" : "cuda kernels";
#else
  report.pipeline_backend = "cpu reference";
#endif
  report.copy_gb_per_s = copy_bandwidth(device);

  model::TransformerWeights weights = bench_weights(preset.transformer, options.seed, placement);
  const int64_t vocab = preset.transformer.vocab_size;
  const family::TokenLayout layout(vocab, std::vector<int64_t>(static_cast<size_t>(preset.grid * preset.grid), -1),
                                   preset.grid, preset.grid, preset.first_code_id, preset.codebook_size);
  // A generation's output head computes the image codes' and structure tokens' rows only
  // (Transformer::restrict_outputs): the bench's forwards and its weight bytes do the same, with
  // the codes' rows (its layout has no structure tokens: 8192 rows where Lumina's generation has 8198).
  report.head_rows = static_cast<int64_t>(layout.emittable().size());
  report.parameters = weight_bytes(weights, true) / static_cast<int64_t>(at::elementSize(placement.dtype));
  report.weight_bytes_per_step =
      weight_bytes(weights, false) - weights.lm_head.nbytes() / vocab * (vocab - report.head_rows);
  report.weights_checksum = weights.lm_head.to(at::kDouble).sum().item<double>() +
                            weights.layers.front()
                                .qkv.narrow(0, 0, preset.transformer.num_heads * preset.transformer.head_dim)
                                .to(at::kDouble)
                                .sum()
                                .item<double>();
  model::Transformer model(preset.transformer, std::move(weights));
  model.restrict_outputs(layout.emittable());
  report.step_graphs = model.step_graphs();
  report.fused_layer_ops = model.fused_layer_ops();
  // From here on, what a generation holds: the weights, the KV cache, graphs and a step's work.
  // The making of the hashed weights (GB of int64 and double temporaries) and the checksum's
  // float64 copy of lm_head (2.1 GB for Lumina) belong to the bench, not to a generation.
  reset_peak_memory(device);

  std::set<int> windows(options.windows.begin(), options.windows.end());
  for (const auto& m : kPaperMethods) {
    if (m.window > 0) windows.insert(m.window);
  }
  const decoding::WindowShape tree{BenchReport::kTreeChain, BenchReport::kTreeK, BenchReport::kTreeDepth};
  const int longest = std::max(*windows.rbegin(), decoding::window_nodes(tree));
  const auto rows = [&](int64_t length) { return cfg_rows(length, vocab); };
  // The prefill of a whole image's cache, the fastest of the timed runs after the warm-ups: a single
  // run took 0.05 to 1.2 s on an H100 (first-shape costs, such as cuDNN plans, may be why; unproven).
  // Sized as a generation sizes its cache (decoding/decoder.cpp: the layout's tokens), as the
  // mid-image fixture below is: one capacity, which the mid-image start then keeps.
  const auto prefill = [&] { model.start(rows(preset.prompt_tokens), layout.length(), longest); };
  for (int i = 0; i < options.warmup; ++i) prefill();
  report.prefill_seconds = std::numeric_limits<double>::infinity();
  for (int i = 0; i < options.iterations; ++i) {
    report.prefill_seconds = std::min(report.prefill_seconds, timed_ms(device, prefill) / 1e3);
  }

  // Steps at mid-image: the cache holds the prompt and half the image, and is sized as a whole
  // image's generation sizes it (prompt, image, the largest window), so the peak memory is that run's.
  const int64_t half = layout.length() / 2;
  model.start(rows(preset.prompt_tokens + half), layout.length() - half, longest);
  report.ar = StepFixture(model, preset, layout, 0, placement, options.seed).run(options.iterations, options.warmup);
  for (int w : windows) {
    report.windows.push_back(
        StepFixture(model, preset, layout, w, placement, options.seed).run(options.iterations, options.warmup));
  }
  report.tree = StepFixture(model, preset, layout, tree.chain, placement, options.seed, tree)
                    .run(options.iterations, options.warmup);
  report.weight_read_gb_per_s =
      static_cast<double>(report.weight_bytes_per_step) / (report.ar.forward_ms * 1e-3) / 1e9;

  report.vq_seconds = -1.0;
  report.png_seconds = -1.0;
  if (options.vq) {
    const VqStandIn vq(preset.vq, device, options.seed);
    vq.decode(preset.grid);  // warm-up
    report.vq_seconds = timed_ms(device, [&] { vq.decode(preset.grid); }) / 1e3;
    report.png_seconds = png_write_seconds(vq::to_rgb_bytes(vq.decode(preset.grid)[0].cpu()));
  }
  report.peak = peak_memory(device);

  estimate_methods(report);
  plan_auto_window(report, layout.length());
  for (int b : options.batch_sizes) report.batches.push_back(time_batch(model, options, report, layout, b));
  report.step_graphs_failure = model.step_graphs_failure();
  if (options.figures_ready) options.figures_ready(report);
  if (!options.profile_dir.empty()) {
    profile_bench_steps(model, options, report, layout, *windows.rbegin(), tree, longest);
  }
  report.step_graphs_failure = model.step_graphs_failure();  // after every forward of the bench
  return report;
}

namespace {

std::string gigabytes(double bytes) {
  std::ostringstream out;
  out << std::setprecision(4) << bytes / 1e9 << " GB";
  return out.str();
}

std::string share(double part, double total) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << (total > 0 ? 100.0 * part / total : 0.0) << "%";
  return out.str();
}

void step_line(std::ostringstream& out, const std::string& label, const StepTiming& t) {
  const double total = t.total_ms();
  out << std::left << std::setw(18) << label << std::right << std::setw(10) << total << " ms   forward "
      << share(t.forward_ms, total) << ", pipeline " << share(t.pipeline_ms, total) << ", verify "
      << share(t.verify_ms, total) << ", kv " << share(t.kv_ms, total) << "; queued whole: " << t.queued_ms
      << " ms; attention: " << t.attention << "\n";
}

}  // namespace

std::string format_report(const BenchReport& r) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  out << "preset: " << r.preset.name << " -- " << r.preset.description << "\n"
      << "device: " << r.device << ", dtype " << r.dtype << ", logits pipeline and verification: "
      << r.pipeline_backend << "; CUDA graphs of the forward: " << (r.step_graphs ? "on" : "off")
      << (r.device.rfind("cuda", 0) == 0 ? " (on unless SJD_CUDA_GRAPHS=0)" : " (GPU only)")
      << (r.step_graphs_failure.empty() ? "" : "; switched off after a failed capture: " + r.step_graphs_failure)
      << "; fused layer kernels: " << (r.fused_layer_ops ? "on" : "off")
      << (r.device.rfind("cuda", 0) == 0 ? " (on unless SJD_FUSED_LAYER_OPS=0)" : " (GPU only)") << "\n"
      << "parameters: " << r.parameters << " (" << gigabytes(static_cast<double>(r.weight_bytes_per_step))
      << " of weights read per forward, the output head's " << r.head_rows << " of " << r.preset.transformer.vocab_size
      << " rows: the image codes, as a generation restricts it)\n"
      << "weights checksum: " << std::setprecision(9) << r.weights_checksum << std::setprecision(3)
      << " (sum of lm_head and layer 0 q_proj; the eager reference prints the same)\n"
      << "copy bandwidth: " << r.copy_gb_per_s << " GB/s (read + write)\n"
      << "weight-read bandwidth (AR forward): " << r.weight_read_gb_per_s << " GB/s = "
      << share(r.weight_read_gb_per_s, r.copy_gb_per_s) << " of copy bandwidth\n"
      << "prefill: " << r.prefill_seconds * 1e3 << " ms (" << r.preset.prompt_tokens
      << " tokens x 2 rows, the fastest of the timed runs)\n"
      << "steps at mid-image, CFG batch 2 (mean of the timed runs):\n";
  step_line(out, "ar step", r.ar);
  for (const auto& t : r.windows) step_line(out, "window L=" + std::to_string(t.window), t);
  step_line(out, "tree L=" + std::to_string(r.tree.window) + " K=" + std::to_string(BenchReport::kTreeK) +
                     " D=" + std::to_string(BenchReport::kTreeDepth),
            r.tree);
  out << "  (the tree window: " << r.tree.nodes << " draft nodes; sjd-pac runs it after a rejection)\n";
  out << "vq decode: ";
  if (r.vq_seconds < 0) {
    out << "not measured\n";
  } else {
    out << r.vq_seconds * 1e3 << " ms (stand-in decoder, " << r.preset.image_side << " px)\n";
  }
  if (r.png_seconds >= 0) {
    out << "png write: " << r.png_seconds * 1e3 << " ms (the stand-in's image, noise-like; one host core, synced; "
        << "sjd batch writes beside its decoding)\n";
  }
  out << r.peak.what << ": " << gigabytes(static_cast<double>(r.peak.bytes)) << "\n"
      << "seconds per image (" << r.preset.generated_tokens << " tokens; prefill + steps + vq decode):\n";
  for (const auto& m : r.methods) {
    out << "  " << std::left << std::setw(8) << m.method << std::right << " compression " << std::setprecision(1)
        << m.step_compression << "x, L=" << m.window << ", " << m.steps << " steps: " << std::setprecision(3)
        << m.seconds << " s\n";
  }
  out << "auto window at batch 1 (CFG 2 rows) from these step times and the prior acceptance: L = " << r.auto_chain
      << "\n";
  if (!r.batches.empty()) {
    out << "batch axis (B prompts x 2 CFG rows in one forward, fastest of the timed runs):\n"
        << "      B    ar ms/step    ar tokens/s    L=" << BatchTiming::kBatchWindow
        << " ms/step    auto L    graphs\n";
    for (const auto& b : r.batches) {
      out << std::setw(7) << b.batch << std::setw(14) << b.ar_ms << std::setw(15) << std::setprecision(1)
          << b.ar_tokens_per_s() << std::setprecision(3) << std::setw(16) << b.window_ms << std::setw(10)
          << b.auto_chain << std::setw(10) << b.graphs << "\n";
    }
  }
  for (const StepProfile& p : r.profiles) out << format_profile(p);
  for (const std::string& failure : r.profile_failures) out << "profile failed: " << failure << "\n";
  return out.str();
}

nlohmann::json to_json(const BenchReport& r) {
  const auto step = [](const StepTiming& t) {
    return nlohmann::json{{"window", t.window},           {"nodes", t.nodes},         {"total_ms", t.total_ms()},
                          {"forward_ms", t.forward_ms},   {"pipeline_ms", t.pipeline_ms}, {"verify_ms", t.verify_ms},
                          {"kv_ms", t.kv_ms},             {"queued_ms", t.queued_ms},
                          {"attention", t.attention}};
  };
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& t : r.windows) windows.push_back(step(t));
  nlohmann::json tree = step(r.tree);
  tree["tree_k"] = BenchReport::kTreeK;
  tree["tree_depth"] = BenchReport::kTreeDepth;
  nlohmann::json profiles = nlohmann::json::array();
  for (const StepProfile& p : r.profiles) profiles.push_back(to_json(p));
  nlohmann::json batches = nlohmann::json::array();
  for (const auto& b : r.batches) {
    batches.push_back({{"batch", b.batch}, {"ar_ms", b.ar_ms}, {"ar_tokens_per_s", b.ar_tokens_per_s()},
                       {"window", BatchTiming::kBatchWindow}, {"window_ms", b.window_ms}, {"auto_chain", b.auto_chain},
                       {"graphs", b.graphs}});
  }
  nlohmann::json methods = nlohmann::json::array();
  for (const auto& m : r.methods) {
    methods.push_back({{"method", m.method}, {"step_compression", m.step_compression}, {"window", m.window},
                       {"steps", m.steps}, {"seconds", m.seconds}});
  }
  return {{"preset", r.preset.name},
          {"device", r.device},
          {"dtype", r.dtype},
          {"backend", r.pipeline_backend},
          {"cuda_graphs", r.step_graphs},
          {"cuda_graphs_failure", r.step_graphs_failure},
          {"fused_layer_ops", r.fused_layer_ops},
          {"parameters", r.parameters},
          {"weights_checksum", r.weights_checksum},
          {"weight_bytes_per_step", r.weight_bytes_per_step},
          {"generated_tokens", r.preset.generated_tokens},
          {"head_rows", r.head_rows},
          {"copy_gb_per_s", r.copy_gb_per_s},
          {"weight_read_gb_per_s", r.weight_read_gb_per_s},
          {"prefill_seconds", r.prefill_seconds},
          {"ar_step", step(r.ar)},
          {"window_steps", windows},
          {"tree_step", tree},
          {"vq_seconds", r.vq_seconds},
          {"png_seconds", r.png_seconds},
          {"peak_memory", {{"bytes", r.peak.bytes}, {"what", r.peak.what}}},
          {"seconds_per_image", methods},
          {"step_cost", r.step_cost.to_json()},
          {"auto_window_chain", r.auto_chain},
          {"batches", batches},
          {"profiles", profiles},
          {"profile_failures", r.profile_failures}};
}

}  // namespace sjd::engine
