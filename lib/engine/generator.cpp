#include "engine/generator.h"

#include <chrono>

#include "engine/cost_profiles.h"
#include "io/weights.h"
#include "sampling/relaxation.h"

namespace sjd::engine {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Generator::Generator(Bundle bundle, Placement placement) : bundle_(std::move(bundle)) {
  tokenizer_ = load_bundle_tokenizer(bundle_);
  weights_ = io::WeightMap::load_all(bundle_.transformer_weights);
  family(0);  // checks the layout before the weights are converted
  model_ = std::make_unique<model::Transformer>(
      bundle_.transformer, model::load_transformer_weights(weights_, bundle_.transformer, placement.dtype, placement.device));
  vq_ = vq::make_vq_decoder(bundle_.vq, io::WeightMap::load_all(bundle_.vq_weights));
}

Generator::~Generator() = default;

const family::ImageFamily& Generator::family(int64_t resolution) {
  auto& slot = families_[resolution];
  if (!slot) slot = family::make_family(family_context(bundle_, *tokenizer_, &weights_, resolution));
  return *slot;
}

GenerationOutput Generator::generate(const std::string& prompt, const GenerationSettings& settings,
                                     uint32_t sequence) {
  const auto start = Clock::now();
  GenerationOutput out;
  out.settings = settings;
  out.method = method_from_settings(settings);
  const family::ImageFamily& glue = family(settings.resolution);
  if (out.method.relax.kind == sampling::RelaxKind::kLantern) {
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
  request.sequence = sequence;
  decoding::DecodeResult result = decoding::decode(*model_, glue.layout(), request);
  out.tokens = std::move(result.tokens);
  out.stats = std::move(result.stats);

  const auto vq_start = Clock::now();
  out.codes = glue.layout().codes(out.tokens);
  out.image = vq_->decode(out.codes);
  out.vq_seconds = since(vq_start);
  out.total_seconds = since(start);
  return out;
}

}  // namespace sjd::engine
