#pragma once
// `sjd compare`: every method on the same prompts and seeds; a table (method,
// exactness, steps, step compression, mean accepted drafts, seconds, speed-up
// vs ar), its JSON, and a side-by-side image grid (rows: prompt x seed,
// columns: methods).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/generator.h"

namespace sjd::engine {

struct CompareOptions {
  std::vector<std::string> prompts;
  std::vector<std::string> methods;  // "name" or "name:relaxation"
  int seeds = 1;                 // seeds base.seed .. base.seed + seeds - 1
  GenerationSettings base;       // every setting but the method
};

struct CompareRow {
  std::string method;            // the method's description (parameters, LOSSY mark)
  bool lossless = true;           // no relaxation (exact or greedy)
  std::string exactness;         // "exact" | "greedy" | "lossy" (decoding::Exactness)
  int runs = 0;
  double steps = 0.0;            // mean per image
  double step_compression = 0.0; // tokens / steps over all images
  double accepted_drafts = 0.0;  // mean drafts accepted per step (step compression - 1)
  double decode_seconds = 0.0;   // mean decode loop per image (prefill + steps)
  double seconds = 0.0;          // mean wall time per image (generation + VQ decode)
  double decode_speedup = 0.0;   // ar's decode seconds / this method's, 0 without an ar row
  double speedup = 0.0;          // ar's seconds / this method's, 0 without an ar row
  double mean_chain = 0.0;       // the windows used: mean L over steps
  double mean_tree_k = 0.0;      // mean K and D over tree windows (sjd-pac)
  double mean_tree_depth = 0.0;
};

struct CompareReport {
  std::vector<CompareRow> rows;
  at::Tensor grid;               // uint8 [rows * H, methods * W, 3]
};

// The settings of one --methods entry: "name" or "name:relaxation" (e.g. "sjd-pac:cool").
GenerationSettings compare_settings(const GenerationSettings& base, const std::string& entry);

CompareReport run_compare(Generator& generator, const CompareOptions& options);

std::string format_table(const CompareReport& report);
nlohmann::json to_json(const CompareReport& report, const CompareOptions& options);

}  // namespace sjd::engine
