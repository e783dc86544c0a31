#include "engine/calibrate.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "engine/cost_profiles.h"
#include "engine/device.h"
#include "sampling/logits_pipeline.h"

#include <ATen/Parallel.h>

namespace sjd::engine {

decoding::StepCostProfile calibrate_step_cost(Generator& generator, const GenerationSettings& settings,
                                              const CalibrateOptions& options) {
  const family::ImageFamily& glue = generator.family(settings.resolution);
  const family::TokenLayout& layout = glue.layout();
  model::Transformer& model = generator.transformer();
  const std::string prompt = "a calibration prompt";
  std::vector<model::RowPrompt> rows = {glue.conditional(prompt)};
  if (settings.cfg != 1.0) rows.push_back(glue.unconditional(prompt));
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
  std::vector<std::pair<int, double>> points;
  for (int tokens : options.tokens) {
    model::DraftTree chain;
    for (int i = 1; i < tokens; ++i) chain.push(layout.first_code_id() + (i * 17) % layout.codebook_size(), i - 2);
    std::vector<sampling::SlotConstraint> constraints;
    for (int i = 0; i < tokens; ++i) constraints.push_back(layout.constraint(std::min(half + i, layout.length() - 1)));
    std::vector<double> ms;
    for (int i = 0; i < options.warmup + options.iterations; ++i) {
      synchronize(device);
      const auto start = std::chrono::steady_clock::now();
      const at::Tensor logits = model.forward(roots, chain);
      sampling::run_logits_pipeline(logits, constraints, pipeline);
      const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (i >= options.warmup) ms.push_back(elapsed);
    }
    // The fastest repetition: other work on the machine only ever adds time.
    const double fastest = *std::min_element(ms.begin(), ms.end());
    points.emplace_back(tokens, points.empty() ? fastest : std::max(fastest, points.back().second));
  }
  std::ostringstream name;
  name << generator.bundle().name << " " << cost_profile_key(settings.device, settings.dtype) << " "
       << at::get_num_threads() << " thread" << (at::get_num_threads() == 1 ? "" : "s");
  return decoding::StepCostProfile(name.str(), static_cast<int>(rows.size()), std::move(points));
}

}  // namespace sjd::engine
