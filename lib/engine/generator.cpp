#include "engine/generator.h"

#include <ATen/Parallel.h>

#include <chrono>

#include "decoding/window_planner.h"
#include "engine/cost_profiles.h"
#include "engine/memory_estimate.h"
#include "engine/settings_checks.h"
#include "engine/weight_checks.h"
#include "io/weights.h"
#include "sampling/relaxation.h"

namespace sjd::engine {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Loading a TorchScript archive runs the code it holds (torch.jit.load executes
// __setstate__ methods): only with the user's explicit --trust-code.
void refuse_untrusted_code(const Bundle& b) {
  if (b.trust_code) return;
  std::vector<std::filesystem::path> files = b.transformer_weights;
  files.insert(files.end(), b.vq_weights.begin(), b.vq_weights.end());
  for (const auto& file : files) {
    const std::string extension = file.extension().string();
    if (extension == ".pt" || extension == ".ts") {
      throw InputError(file.string() + ": TorchScript weights run code when loaded; pass --trust-code only if you "
                       "trust who made this bundle (safetensors bundles never run code)");
    }
  }
}

// Every prompt token must be a row of the embedding: a tokenizer whose ids run
// past the model's vocabulary would otherwise fail inside the transformer.
void check_prompt_tokens(const std::vector<model::RowPrompt>& rows, int64_t vocab_size, const std::string& where) {
  for (const model::RowPrompt& row : rows) {
    for (const int64_t token : row.tokens) {
      if (token < 0 || token >= vocab_size) {
        throw InputError(where + ": the tokenizer gave id " + std::to_string(token) +
                         ", outside the model's vocabulary of " + std::to_string(vocab_size) +
                         " (transformer.vocab_size)");
      }
    }
  }
}

// ATen splits reductions (convolutions, normalisations) by the intra-op thread
// count, so the decoded floats -- and, near a rounding boundary, a PNG byte --
// would depend on OMP_NUM_THREADS. The VQ decode always runs on this many
// threads, so the same tokens give the same bytes on any machine of the same
// CPU kind (docs/security.md states the promise).
constexpr int kVqDecodeThreads = 4;

class FixedThreadCount {
 public:
  explicit FixedThreadCount(int threads) : saved_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~FixedThreadCount() { at::set_num_threads(saved_); }
  FixedThreadCount(const FixedThreadCount&) = delete;
  FixedThreadCount& operator=(const FixedThreadCount&) = delete;

 private:
  int saved_;
};

}  // namespace

Generator::Generator(Bundle bundle, Placement placement) : bundle_(std::move(bundle)), placement_(placement) {
  refuse_untrusted_code(bundle_);
  tokenizer_ = load_bundle_tokenizer(bundle_);
  weights_ = io::WeightMap::load_all(bundle_.transformer_weights);
  check_weights_usable(weights_, /*floating_only=*/true);
  check_no_extra_layers(weights_, bundle_.transformer.num_layers, bundle_.json_path.string() + ": transformer.num_layers");
  const family::TokenLayout& layout = family(0).layout();  // checks the layout before the weights are converted
  if (layout.codebook_size() > bundle_.vq.codebook_size) {
    throw InputError(bundle_.json_path.string() + ": layout.codebook_size " + std::to_string(layout.codebook_size()) +
                     " is larger than vq.codebook_size " + std::to_string(bundle_.vq.codebook_size));
  }
  model_ = std::make_unique<model::Transformer>(
      bundle_.transformer, model::load_transformer_weights(weights_, bundle_.transformer, placement.dtype, placement.device));
  io::WeightMap vq_weights = io::WeightMap::load_all(bundle_.vq_weights);
  check_weights_usable(vq_weights, /*floating_only=*/false);
  vq_ = vq::make_vq_decoder(bundle_.vq, std::move(vq_weights));
}

Generator::~Generator() = default;

const family::ImageFamily& Generator::family(int64_t resolution) {
  auto& slot = families_[resolution];
  if (!slot) {
    try {
      slot = family::make_family(family_context(bundle_, *tokenizer_, &weights_, resolution));
    } catch (const nlohmann::json::exception& e) {  // a layout value of the wrong type
      throw InputError(bundle_.json_path.string() + ": layout: " + e.what());
    }
  }
  return *slot;
}

GenerationOutput Generator::generate(const std::string& prompt, const GenerationSettings& settings, uint32_t sequence,
                                     const std::function<void(const decoding::StepProgress&)>& on_step) {
  const auto start = Clock::now();
  GenerationOutput out;
  out.settings = settings;
  out.method = method_from_settings(settings);
  const family::ImageFamily& glue = family(settings.resolution);
  if (out.method.speculative() && !out.method.auto_window) check_window_fits(out.method.window, glue.layout().length());
  if (out.method.relax.kind == sampling::RelaxKind::kLantern) {
    if (out.method.relax.lantern_k >= glue.layout().codebook_size()) {
      throw InputError("--lantern-k " + std::to_string(out.method.relax.lantern_k) + " must be smaller than the " +
                       std::to_string(glue.layout().codebook_size()) + " image codes");
    }
    if (lantern_k_ != out.method.relax.lantern_k) {
      const family::TokenLayout& layout = glue.layout();
      lantern_table_ = sampling::lantern_neighbours(vq_->codebook(), out.method.relax.lantern_k,
                                                    layout.first_code_id(), layout.vocab_size());
      lantern_k_ = out.method.relax.lantern_k;
    }
    out.method.relax.neighbours = lantern_table_;
  }
  decoding::DecodeRequest request;
  request.rows.push_back(glue.conditional(prompt));
  if (settings.cfg != 1.0) request.rows.push_back(glue.unconditional(prompt));
  request.pipeline = pipeline_from_settings(settings, glue.cfg_mix(), out.method.greedy);
  request.method = out.method;
  request.seed = settings.seed;
  request.cost_profile = resolve_cost_profile(bundle_, settings);
  check_prompt_tokens(request.rows, bundle_.transformer.vocab_size, bundle_.json_path.string());
  check_memory_fits(estimate_memory(request, glue.layout().length()), memory_limit_, placement_.device);
  request.sequence = sequence;
  request.on_step = on_step;
  decoding::DecodeResult result = decoding::decode(*model_, glue.layout(), request);
  out.tokens = std::move(result.tokens);
  out.stats = std::move(result.stats);

  const auto vq_start = Clock::now();
  out.codes = glue.layout().codes(out.tokens);
  {
    const FixedThreadCount threads(kVqDecodeThreads);
    out.image = vq_->decode(out.codes);
  }
  out.vq_seconds = since(vq_start);
  out.total_seconds = since(start);
  return out;
}

MemoryEstimate Generator::estimate_memory(const decoding::DecodeRequest& request, int64_t image_tokens) const {
  GenerationShape shape;
  shape.rows = static_cast<int64_t>(request.rows.size());
  for (const auto& row : request.rows) {
    shape.longest_prompt = std::max<int64_t>(shape.longest_prompt, static_cast<int64_t>(row.tokens.size()));
  }
  shape.image_tokens = image_tokens;
  // The largest window the method may use (automatic ones included), as decode() sizes the cache.
  const decoding::WindowPlanner planner(request.method, request.cost_profile, static_cast<int>(shape.rows));
  shape.window_nodes = decoding::window_nodes(planner.largest());
  return estimate_generation_memory(bundle_.transformer, shape, placement_.dtype);
}

}  // namespace sjd::engine
