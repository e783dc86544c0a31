#pragma once
// `sjd compare`: every method on the same prompts and seeds. Each run (prompt,
// seed, method) writes its image to DIR/runs/ as soon as it is made and appends a
// line to DIR/runs/manifest.jsonl, so a long compare resumes like `batch`: re-running the
// same command skips finished runs (their recorded figures are reused) and a
// folder made with other prompts, model or settings is refused. The report has a
// row per method (steps, step compression, mean accepted drafts, seconds,
// speed-up vs ar, the mean accepted-length histogram) and a row per run; the
// figure is drawn by compare_figure.h.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/generator.h"

namespace sjd::engine {

struct CompareOptions {
  std::vector<std::string> prompts;
  std::vector<std::string> methods;  // "name" or "name:relaxation"
  int seeds = 1;                 // seeds base.seed .. base.seed + seeds - 1
  GenerationSettings base;       // every setting but the method
  std::filesystem::path out_dir; // runs/ (one PNG per run and manifest.jsonl) goes here
  bool progress = false;         // an updating progress line with ETA (a terminal)
  // Nonzero (a signal number) once the run is asked to stop: no new run starts, the ones in flight
  // finish (as batch's BatchOptions::stop_requested). Empty: never.
  std::function<int()> stop_requested;
};

// One image: prompt x seed x method. Index (prompt * seeds + seed) * methods + method,
// so prompts appended to a prompt file keep the indices of the runs before them.
// compare.png shows the first rows (prompt x seed) of a longer compare: only their runs keep their images in
// memory (every run's is in runs/; 20,000 runs held 1.4 GB of 128 px images).
constexpr int kCompareFigureRows = 24;

struct CompareRun {
  int64_t index = 0;
  int prompt = 0;                // index into CompareOptions::prompts
  int seed_index = 0;            // 0 .. seeds - 1
  int method = 0;                // index into CompareOptions::methods
  nlohmann::json record;         // its runs/manifest.jsonl line (steps, seconds, histogram, file, ...)
  at::Tensor image;              // uint8 [H, W, 3]; undefined past the figure's rows (kCompareFigureRows)
  bool resumed = false;          // made by an earlier run of the same command
};

struct CompareRow {
  std::string entry;             // the --methods entry ("sjd-pac:cool")
  std::string method;            // the method's description (parameters, LOSSY mark)
  bool lossless = true;           // not lossy: exact or greedy
  std::string exactness;         // "exact" | "greedy" | "lossy" (decoding::Exactness)
  int runs = 0;
  double steps = 0.0;            // mean per image
  double step_compression = 0.0; // tokens / steps over all images
  double accepted_drafts = 0.0;  // mean drafts accepted per step (step compression - 1)
  double decode_seconds = 0.0;   // mean decode loop per image (prefill + steps)
  double seconds = 0.0;          // mean wall time per image (generation + VQ decode)
  double seconds_min = 0.0;      // the fastest and slowest run: a wide spread means the machine's load varied
  double seconds_max = 0.0;
  double decode_speedup = 0.0;   // ar's decode seconds / this method's, 0 without an ar row
  double speedup = 0.0;          // ar's seconds / this method's, 0 without an ar row
  double mean_chain = 0.0;       // the windows used: mean L over steps
  double mean_tree_k = 0.0;      // mean K and D over tree windows (sjd-pac)
  double mean_tree_depth = 0.0;
  std::vector<double> accepted_share;  // [n]: share of steps that committed n tokens, over all images
};

struct CompareReport {
  std::vector<CompareRow> rows;  // per method, in --methods order
  std::vector<CompareRun> runs;  // per run, by index
  int64_t resumed = 0;           // runs taken from an earlier invocation
  int stopped_by = 0;            // the signal that stopped it before every run was made (rows then empty,
                                 // runs partly made)
  int64_t made = 0;              // runs this invocation made
};

// The settings of one --methods entry: "name" or "name:relaxation" (e.g. "sjd-pac:cool").
GenerationSettings compare_settings(const GenerationSettings& base, const std::string& entry);
// The batch size compare decodes with: the one given, or for "auto" one run at a time (as generate).
int compare_batch_size(const GenerationSettings& base);

// Runs (or resumes) every run of `options`; warnings and the progress line go to `log`.
CompareReport run_compare(Generator& generator, const CompareOptions& options, std::ostream& log);

// The table `sjd compare` prints, then a note for each method whose runs' seconds spread more than 1.5x.
std::string format_table(const CompareReport& report);
nlohmann::json to_json(const CompareReport& report, const CompareOptions& options);

}  // namespace sjd::engine
