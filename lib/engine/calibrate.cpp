#include "engine/calibrate.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "decoding/decoder.h"
#include "engine/cost_profiles.h"
#include "engine/device.h"
#include "io/device_transfer.h"
#include "sampling/logits_pipeline.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

namespace sjd::engine {
namespace {

// `batch` prompts' rows (conditional, and the guidance row with CFG) of one calibration prompt.
std::vector<model::RowPrompt> calibration_rows(const family::ImageFamily& glue, const GenerationSettings& settings,
                                               int batch) {
  const std::string prompt = "a calibration prompt";
  std::vector<model::RowPrompt> rows;
  for (int b = 0; b < batch; ++b) {
    for (model::RowPrompt& row : prompt_rows(glue, prompt, settings)) rows.push_back(std::move(row));
  }
  return rows;
}

// Throws InputError with the estimate when `batch` prompts with the largest window would not fit the memory.
void check_calibration_memory(Generator& generator, const GenerationSettings& settings, int batch, int largest) {
  const family::ImageFamily& glue = generator.family(settings.resolution);
  const std::vector<model::RowPrompt> rows = calibration_rows(glue, settings, batch);
  GenerationShape shape;
  shape.rows = static_cast<int64_t>(rows.size());
  for (const auto& row : rows) {
    shape.longest_prompt = std::max<int64_t>(shape.longest_prompt, static_cast<int64_t>(row.tokens.size()));
  }
  shape.image_tokens = glue.layout().length();
  shape.window_nodes = largest - 1;
  try {
    generator.check_memory(shape);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " for a calibration batch of " + std::to_string(batch));
  }
}

// One curve: `batch` prompts' rows in one forward, timed at mid-image for each window size.
decoding::StepCostCurve measure_curve(Generator& generator, const GenerationSettings& settings,
                                      const CalibrateOptions& options, int batch) {
  const family::ImageFamily& glue = generator.family(settings.resolution);
  const family::TokenLayout& layout = glue.layout();
  model::Transformer& model = generator.transformer();
  const std::vector<model::RowPrompt> rows = calibration_rows(glue, settings, batch);
  const int largest = *std::max_element(options.tokens.begin(), options.tokens.end());
  model.restrict_outputs(layout.emittable());
  model.start(rows, layout.length(), largest);

  // Mid-image: half of the sequence committed (code tokens; the layout's constraints are not needed here).
  const int64_t half = layout.length() / 2;
  std::vector<int64_t> roots(rows.size(), layout.first_code_id());
  for (int64_t t = 0; t < half; ++t) {
    model.forward(roots, model::DraftTree{});
    model.commit({});
    roots.assign(rows.size(), layout.first_code_id() + (t * 31) % layout.codebook_size());
  }
  const sampling::PipelineSettings pipeline = pipeline_from_settings(settings, glue.cfg_mix(), false);
  const at::Device device = model.device();
  decoding::StepCostCurve curve{static_cast<int>(rows.size()), {}};
  for (int tokens : options.tokens) {
    model::DraftTree chain;
    for (int i = 1; i < tokens; ++i) chain.push(layout.first_code_id() + (i * 17) % layout.codebook_size(), i - 2);
    std::vector<sampling::SlotConstraint> constraints;
    for (int i = 0; i < tokens; ++i) constraints.push_back(layout.constraint(std::min(half + i, layout.length() - 1)));
    std::vector<double> ms;
    for (int i = 0; i < options.warmup + options.iterations; ++i) {
      io::synchronize(device);
      const auto start = std::chrono::steady_clock::now();
      const at::Tensor logits = model.forward(roots, chain);
      sampling::run_logits_pipeline(logits, constraints, pipeline, model.output_ids());
      io::synchronize(device);  // a GPU's pipeline runs queued (its probabilities stay there for the device verifier)
      const double elapsed =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (i >= options.warmup) ms.push_back(elapsed);
    }
    // The fastest repetition: other work on the machine only ever adds time.
    const double fastest = *std::min_element(ms.begin(), ms.end());
    curve.points.emplace_back(tokens, curve.points.empty() ? fastest : std::max(fastest, curve.points.back().second));
  }
  return curve;
}

}  // namespace

decoding::StepCostProfile calibrate_step_cost(Generator& generator, const GenerationSettings& settings,
                                              const CalibrateOptions& options) {
  c10::InferenceMode inference_mode;  // as a generation's decode loop runs: no autograd bookkeeping per call
  std::vector<int> batches = options.batch_sizes;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  // The largest batch needs the most memory: refuse it before any timing.
  check_calibration_memory(generator, settings, batches.back(),
                           *std::max_element(options.tokens.begin(), options.tokens.end()));
  std::vector<decoding::StepCostCurve> curves;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (options.on_curve) options.on_curve(batches[i], static_cast<int>(i), static_cast<int>(batches.size()));
    curves.push_back(measure_curve(generator, settings, options, batches[i]));
  }
  std::ostringstream name;
  name << generator.bundle().name << " " << cost_profile_key(settings.device, settings.dtype) << " "
       << at::get_num_threads() << " thread" << (at::get_num_threads() == 1 ? "" : "s");
  return decoding::StepCostProfile(name.str(), std::move(curves));
}

}  // namespace sjd::engine
