#pragma once
// `sjd bench`: timings of the full-size architectures with deterministic
// random weights made on the device -- ms per AR step and per window step
// (with CFG), their split into forward / logits pipeline / verification / KV
// bookkeeping, achieved weight-read bandwidth against the measured copy
// bandwidth, peak memory, and seconds per image for AR and each method at the
// papers' step compression. A program that prints figures; nothing asserts them.
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "decoding/step_cost.h"
#include "engine/bench_profile.h"
#include "engine/bench_setup.h"
#include "engine/device.h"

namespace sjd::engine {

struct BenchReport;

struct BenchOptions {
  std::string preset = "tiny";
  Placement placement;
  std::vector<int> windows = {16, 32, 64};
  int iterations = 5;     // timed repetitions of each step kind
  int warmup = 2;         // untimed ones first
  uint64_t seed = 0;      // weights and drafts
  bool vq = true;         // time the VQ decoder stand-in
  std::vector<int> batch_sizes = {1, 4, 16};  // the batch axis: prompts per step (each with its CFG pair)
  std::string profile_dir;  // non-empty: Kineto traces of the AR, widest window and tree steps go there
  int profile_steps = 3;    // steps per profiled kind
  // Called with every figure but the profiles, before those run: a profiler that hangs (CUPTI
  // meeting graphs captured before it) and is killed then loses only the profiles.
  std::function<void(const BenchReport&)> figures_ready;
};

// One batch size: the forward of an AR step and of a window step of kBatchWindow
// drafts, every prompt's CFG pair in one forward.
struct BatchTiming {
  static constexpr int kBatchWindow = 16;
  int batch = 1;
  double ar_ms = 0.0;
  double window_ms = 0.0;
  int auto_chain = 0;  // the L --window auto starts from when planned for this batch
  size_t graphs = 0;   // CUDA graphs captured after its forwards (2 when both shapes replayed graphs; 0: eager)
  double ar_tokens_per_s() const { return ar_ms > 0 ? 1e3 * batch / ar_ms : 0.0; }
};

// One step kind: where its milliseconds went (each phase timed to completion).
struct StepTiming {
  int window = 0;  // draft positions on the spine (0: an AR step)
  int nodes = 0;   // draft nodes in the window: the spine's, and a tree's other candidates
  double forward_ms = 0.0;
  double pipeline_ms = 0.0;
  double verify_ms = 0.0;
  double kv_ms = 0.0;
  std::string attention;  // the forward's attention kernel (Transformer::attention_backend)
  // The same step timed whole, its phases queued one after another as the decoding loop runs
  // them (on a GPU the host prepares the pipeline and the verification while the forward runs):
  // what a generation pays per step. The phases above each wait for the device.
  double queued_ms = 0.0;
  double total_ms() const { return forward_ms + pipeline_ms + verify_ms + kv_ms; }
  // What a step costs a generation: the queued whole step where it was timed.
  double step_ms() const { return queued_ms > 0 ? queued_ms : total_ms(); }
};

// Seconds per image of a method run at a given step compression.
struct MethodEstimate {
  std::string method;
  double step_compression = 1.0;
  int window = 0;
  int64_t steps = 0;
  double seconds = 0.0;  // prefill + steps x step time + VQ decode
};

struct BenchReport {
  BenchPreset preset;
  std::string device;
  std::string dtype;
  int64_t parameters = 0;
  double weights_checksum = 0.0;      // sum of lm_head and layer 0's q projection, in float64
  int64_t weight_bytes_per_step = 0;  // every weight a forward reads (all but the embedding table and unused head rows)
  int64_t head_rows = 0;              // output head rows a forward computes (the image codes)
  double copy_gb_per_s = 0.0;         // device copy, bytes read + written
  double prefill_seconds = 0.0;
  StepTiming ar;
  std::vector<StepTiming> windows;
  // SJD-PAC's tree window after a rejection: the L = 64 spine and kTreeK candidates at each of the
  // first kTreeDepth depths (the tool's defaults).
  static constexpr int kTreeChain = 64, kTreeK = 4, kTreeDepth = 3;
  StepTiming tree;
  double weight_read_gb_per_s = 0.0;  // weight bytes per AR forward / AR forward time
  PeakMemory peak;
  double vq_seconds = 0.0;            // -1: not measured
  // Writing the stand-in's image as a PNG (encode, write, sync) on one host core; -1: not measured.
  // Not in the seconds per image: `sjd batch` writes beside its decoding (engine/image_writer.h).
  double png_seconds = 0.0;
  std::vector<MethodEstimate> methods;
  std::string pipeline_backend;       // "cuda kernels" | "cpu reference"
  bool step_graphs = false;           // window forwards replayed from CUDA graphs (on unless SJD_CUDA_GRAPHS=0)
  std::string step_graphs_failure;    // why they were switched off during the run (empty: they were not)
  bool fused_layer_ops = false;       // the layer's fused kernels (on unless SJD_FUSED_LAYER_OPS=0)
  decoding::StepCostProfile step_cost;  // the AR and window steps above as a profile (rows = 2)
  int auto_chain = 0;                 // the L --window auto picks from it before any acceptance is seen
  std::vector<BatchTiming> batches;   // the batch axis
  std::vector<StepProfile> profiles;  // with BenchOptions::profile_dir: where the profiled steps' time went
  std::vector<std::string> profile_failures;  // a step kind whose profile failed, and why
};

BenchReport run_bench(const BenchOptions& options);

// The most memory the bench holds at once: its weights, and the larger of their making
// (int64 and float64 temporaries of the largest tensor) and its largest step (the fixtures'
// widest window, or a batch size's cache and step), as a generation's estimate counts them.
struct BenchMemory {
  int64_t bytes = 0;
  std::string what;  // "weights 14.03 GB, then at batch size 16: ..."
};
BenchMemory bench_memory(const BenchOptions& options, const BenchPreset& preset);

// Before any weights are made: every window fits the preset's mid-image fixture, and the
// weights and the largest step's cache fit the device's memory (InputError with the estimate).
void check_bench_options(const BenchOptions& options, const BenchPreset& preset);
std::string format_report(const BenchReport& report);
nlohmann::json to_json(const BenchReport& report);

}  // namespace sjd::engine
