#pragma once
// `sjd batch`: one PNG per prompt of a prompt file, a manifest.jsonl line per
// image, decoded settings.batch_size prompts at a time with continuous refill
// (Generator::generate_batch; each image is written as soon as it is made),
// resumable (images already in the manifest are skipped; a manifest from
// other prompts, model or settings is refused), a failing prompt is recorded
// and the run carries on.
#include <filesystem>
#include <functional>
#include <ostream>

#include "engine/batch_shards.h"
#include "engine/generator.h"

namespace sjd::engine {

struct BatchOptions {
  std::filesystem::path prompts;
  std::filesystem::path out_dir;
  GenerationSettings settings;  // image i uses seed settings.seed + i
  int64_t limit = 0;            // 0: every prompt
  Shard shard;                  // only the prompts this shard owns; its own manifest (batch_shards.h)
  bool progress = false;        // a progress line with count and ETA (on a terminal)
  int64_t claim_timeout_seconds = 600;  // a claim untouched this long is taken over (batch_claims.h)
  // Nonzero (a signal number) once the run is asked to stop: no new image starts, the ones in flight
  // finish. Empty: never.
  std::function<int()> stop_requested;
};

struct BatchSummary {
  int64_t generated = 0;
  int64_t skipped = 0;    // already in the manifests when the run began
  int64_t failed = 0;
  int64_t elsewhere = 0;  // made, or being made, by another process working in the same folder since the run began
  int batch_size = 1;     // prompts decoded at once (resolved)
  double seconds = 0.0;   // the whole run
  double compression_sum = 0.0;  // over generated images: mean step compression = sum / generated
  int stopped_by = 0;     // the signal that stopped the run early (BatchOptions::stop_requested), or 0
  int64_t left = 0;       // this shard's images neither made nor failed when it stopped
  std::string method;     // the generated images' method with its exactness label; "" when none was made
};

BatchSummary run_batch(Generator& generator, const BatchOptions& options, std::ostream& log);

// The stable file name of prompt `index`: "00012_a-red-apple.png".
std::string batch_file_name(int64_t index, const std::string& prompt);

}  // namespace sjd::engine
