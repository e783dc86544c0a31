#include "engine/generator.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "decoding/draft_book.h"
#include "decoding/step_timer.h"
#include "decoding/window_planner.h"
#include "engine/cost_profiles.h"
#include "engine/memory_estimate.h"
#include "engine/settings_checks.h"
#include "engine/weight_checks.h"
#include "engine/window_prior.h"
#include "io/atomic_file.h"
#include "io/png_chunks.h"
#include "io/prompt_file.h"
#include "io/weight_checks.h"
#include "io/weights.h"
#include "sampling/categorical.h"
#include "sampling/logits_pipeline.h"
#include "sampling/relaxation.h"

namespace sjd::engine {
namespace {

using Clock = std::chrono::steady_clock;

// The longer of a request's rows, in tokens (Emu3's unconditional row is its negative prompt, which may be
// the longer one).
int64_t longest_row(const std::vector<model::RowPrompt>& rows) {
  int64_t longest = 0;
  for (const model::RowPrompt& row : rows) longest = std::max(longest, static_cast<int64_t>(row.tokens.size()));
  return longest;
}

// What the longest of prompt_rows' rows holds, for messages about its length: the guidance row of a
// negative prompt longer than the prompt is the user's other text.
std::string longest_row_text(const std::vector<model::RowPrompt>& rows, const GenerationSettings& settings) {
  const bool negative =
      rows.size() > 1 && !settings.negative_prompt.empty() && rows[1].tokens.size() > rows[0].tokens.size();
  return negative ? "the negative prompt" : "the prompt";
}

// A prompt that fills every position the model was trained for leaves none for the image; its prefill
// alone would run for minutes on a CPU (60022 tokens of the default model: 212 s), to make noise.
void check_prompt_length(const std::vector<model::RowPrompt>& rows, const GenerationSettings& settings, int64_t limit,
                         const std::string& where) {
  const int64_t tokens = longest_row(rows);
  if (limit > 0 && tokens >= limit) {
    const std::string text = longest_row_text(rows, settings);
    throw InputError(text + " takes " + std::to_string(tokens) + " tokens, at least the " + std::to_string(limit) +
                     " positions the model was trained for (" + where +
                     ": layout.max_positions), which leaves none for the image: shorten " + text);
  }
}

// No token of positive probability, with every weight finite (checked when the model loaded) and the
// settings checked: the weights overflow the run's arithmetic. That is the bundle's fault, bad input
// (exit code 2), and the tensor of the largest magnitude is the likeliest culprit.
InputError overflow_error(const Bundle& bundle, const io::WeightMap& weights, at::ScalarType dtype) {
  const io::LargestWeight largest = io::largest_weight(weights);
  char magnitude[32];
  std::snprintf(magnitude, sizeof magnitude, "%.1e", largest.magnitude);
  return InputError(bundle.json_path.string() + ": the model's logits are not finite although every weight is: the " +
                    "weights overflow " + dtype_name(dtype) + " arithmetic (the largest is tensor '" + largest.name +
                    "' of " + largest.source + ", up to " + magnitude + ")");
}

bool fits(const decoding::DecodeRequest& request, const decoding::BatchCapacity& capacity) {
  for (const auto& row : request.rows) {
    if (static_cast<int64_t>(row.tokens.size()) > capacity.prompt_tokens) return false;
    for (int64_t p : row.positions) {
      if (p > capacity.prompt_position) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<model::RowPrompt> prompt_rows(const family::ImageFamily& glue, const std::string& prompt,
                                          const GenerationSettings& settings) {
  std::vector<model::RowPrompt> rows{glue.conditional(prompt)};
  if (sampling::cfg_mixes(settings.cfg)) {
    rows.push_back(settings.negative_prompt.empty() ? glue.unconditional(prompt)
                                                    : glue.negative(settings.negative_prompt));
  }
  return rows;
}

Generator::Generator(Bundle bundle, Placement placement, std::unique_ptr<text::Tokenizer> tokenizer)
    : bundle_(std::move(bundle)), placement_(placement), tokenizer_(std::move(tokenizer)) {
  if (!bundle_.trust_code) {  // a LlamaGen family refuses its text encoder's archives itself (family_context)
    io::refuse_code_archives(bundle_.transformer_weights);
    io::refuse_code_archives(bundle_.vq_weights);
  }
  if (!tokenizer_) tokenizer_ = load_bundle_tokenizer(bundle_);
  weights_ = io::WeightMap::load_all(bundle_.transformer_weights);
  io::check_weights_usable(weights_, /*floating_only=*/true);
  check_no_extra_layers(weights_, bundle_.transformer.num_layers,
                        bundle_.json_path.string() + ": transformer.num_layers");
  const family::TokenLayout& layout = family(0).layout();  // checks the layout before the weights are converted
  if (layout.codebook_size() > bundle_.vq.codebook_size) {
    throw InputError(bundle_.json_path.string() + ": layout.codebook_size " + std::to_string(layout.codebook_size()) +
                     " is larger than vq.codebook_size " + std::to_string(bundle_.vq.codebook_size));
  }
  // The weights are copied to the run's device and dtype: a model that cannot fit is refused before the copy.
  check_weights_fit(transformer_weight_bytes(weights_, placement.dtype),
                    placement.device.is_cpu() ? available_host_memory() : available_device_memory(placement.device),
                    placement.device, placement.dtype);
  model_ = std::make_unique<model::Transformer>(
      bundle_.transformer,
      model::load_transformer_weights(weights_, bundle_.transformer, placement.dtype, placement.device));
  io::WeightMap vq_weights = io::WeightMap::load_all(bundle_.vq_weights);
  io::check_weights_usable(vq_weights, /*floating_only=*/false);
  vq_ = vq::make_vq_decoder(bundle_.vq, std::move(vq_weights), placement_.device);  // decoded where the model runs
}

Generator::~Generator() = default;

const family::ImageFamily& Generator::family(int64_t resolution) {
  auto& slot = families_[resolution];
  if (!slot) {
    slot = make_bundle_family(bundle_, *tokenizer_, &weights_, resolution);
  }
  return *slot;
}

decoding::DecodeRequest Generator::make_request(const std::string& prompt, const GenerationSettings& settings,
                                                decoding::MethodConfig& method) {
  method = method_from_settings(settings);
  const family::ImageFamily& glue = family(settings.resolution);
  if (method.speculative() && !method.auto_window) check_window_fits(method.window, glue.layout().length());
  if (method.relax.kind == sampling::RelaxKind::kLantern) {
    if (method.relax.lantern_k >= glue.layout().codebook_size()) {
      throw InputError("--lantern-k " + std::to_string(method.relax.lantern_k) + " must be smaller than the " +
                       std::to_string(glue.layout().codebook_size()) + " image codes");
    }
    if (lantern_k_ != method.relax.lantern_k) {
      const family::TokenLayout& layout = glue.layout();
      // On the CPU whatever the device: the neighbours (topk's ties) are then the same everywhere.
      lantern_table_ = sampling::lantern_neighbours(vq_->codebook().to(at::kCPU), method.relax.lantern_k,
                                                    layout.first_code_id(), layout.vocab_size());
      lantern_k_ = method.relax.lantern_k;
    }
    method.relax.neighbours = lantern_table_;
  }
  decoding::DecodeRequest request;
  request.rows = prompt_rows(glue, prompt, settings);
  request.pipeline = pipeline_from_settings(settings, glue.cfg_mix(), method.greedy);
  request.method = method;
  request.seed = settings.seed;
  request.cost_profile = resolve_cost_profile(bundle_, settings);
  request.window_prior = resolve_window_prior(bundle_, settings, method);
  request.planned_batch = std::max(settings.batch_size, 1);
  // SJD_VERIFY_ON_HOST=1: a GPU model's windows verified by the CPU reference, so a device session can
  // tell the kernels' part in a CUDA-vs-CPU token difference from the forward's (docs/gpu.md).
  const char* on_host = std::getenv("SJD_VERIFY_ON_HOST");
  request.verify_on_host = on_host != nullptr && std::string(on_host) == "1";
  for (const model::RowPrompt& row : request.rows) check_ids_in_vocabulary(row.tokens, bundle_);
  check_prompt_length(request.rows, settings, glue.max_positions(), bundle_.json_path.string());
  return request;
}

std::string Generator::context_warning(const std::string& prompt, const GenerationSettings& settings) {
  const family::ImageFamily& glue = family(settings.resolution);
  if (std::string dropped = glue.prompt_warning(prompt); !dropped.empty()) return dropped;
  if (!settings.negative_prompt.empty() && sampling::cfg_mixes(settings.cfg)) {
    if (std::string dropped = glue.prompt_warning(settings.negative_prompt); !dropped.empty()) {
      return "the negative prompt: " + dropped;
    }
  }
  const int64_t limit = glue.max_positions();
  if (limit <= 0) return "";
  const std::vector<model::RowPrompt> rows = prompt_rows(glue, prompt, settings);
  const int64_t prompt_tokens = longest_row(rows);
  const int64_t image_tokens = glue.layout().length();
  // A prompt at or past the limit is refused by make_request, with its own message.
  if (prompt_tokens + image_tokens <= limit || prompt_tokens >= limit) return "";
  const std::string text = longest_row_text(rows, settings);
  return text + " takes " + std::to_string(prompt_tokens) + " tokens and the image " + std::to_string(image_tokens) +
         ", " + std::to_string(prompt_tokens + image_tokens - limit) + " past the " + std::to_string(limit) +
         " positions the model was trained for (" + bundle_.json_path.string() +
         ": layout.max_positions); the image may come out damaged: shorten " + text;
}

GenerationOutput Generator::finish(const GenerationSettings& settings, const decoding::MethodConfig& method,
                                   decoding::DecodeResult result) {
  GenerationOutput out;
  out.settings = settings;
  out.method = method;
  out.tokens = std::move(result.tokens);
  out.stats = std::move(result.stats);
  const auto vq_start = Clock::now();
  out.codes = family(settings.resolution).layout().codes(out.tokens);
  // The same bytes on any thread count (vq/thread_invariant_ops.h), so the decode uses the threads the run has.
  out.image = vq_->decode(out.codes);
  out.vq_seconds = decoding::seconds_since(vq_start);
  return out;
}

GenerationOutput Generator::generate(const std::string& prompt, const GenerationSettings& given, uint32_t sequence,
                                     const std::function<void(const decoding::StepProgress&)>& on_step) {
  const auto start = Clock::now();
  GenerationSettings settings = given;
  if (settings.batch_size == kAuto) settings.batch_size = 1;  // one prompt: plan windows for a batch of one
  decoding::MethodConfig method;
  decoding::DecodeRequest request = make_request(prompt, settings, method);
  const family::TokenLayout& layout = family(settings.resolution).layout();
  check_memory_fits(estimate_memory(request, layout, 1));
  if (on_warning_) {
    if (const std::string warning = context_warning(prompt, settings); !warning.empty()) on_warning_(warning);
  }
  request.sequence = sequence;
  request.on_step = on_step;
  decoding::DecodeResult result;
  try {
    result = decoding::decode(*model_, layout, request);
  } catch (const sampling::NonFiniteLogits&) {
    throw overflow_error(bundle_, weights_, placement_.dtype);
  }
  GenerationOutput out = finish(settings, method, std::move(result));
  out.total_seconds = decoding::seconds_since(start);
  return out;
}

decoding::BatchCapacity Generator::measure_prompts(const BatchPlan& plan) {
  const GenerationSettings& settings = plan.settings;
  decoding::BatchCapacity capacity;
  capacity.rows_per_sequence = sampling::cfg_mixes(settings.cfg) ? 2 : 1;
  const family::ImageFamily& glue = family(settings.resolution);
  const auto measure = [&](const model::RowPrompt& row) {
    capacity.prompt_tokens = std::max<int64_t>(capacity.prompt_tokens, static_cast<int64_t>(row.tokens.size()));
    for (int64_t p : row.positions) capacity.prompt_position = std::max(capacity.prompt_position, p);
  };
  // The longest prompt that fits the memory alone sizes every row; longer ones fail on their own when their turn comes.
  // Where every prompt's rows are alike, the first that fits measures them all: a LlamaGen prompt is
  // measured by running the T5 encoder, seconds each on a CPU for the XL encoder.
  for (const std::string& prompt : plan.prompts) {
    // A prompt that fails before it is tokenised (io::prompt_text_problem: past 1 MiB, bad bytes) sizes nothing.
    if (!io::prompt_text_problem(prompt).empty()) continue;
    try {
      decoding::MethodConfig method;
      const decoding::DecodeRequest request = make_request(prompt, settings, method);
      check_memory_fits(estimate_memory(request, glue.layout(), 1));
      for (const auto& row : request.rows) measure(row);
      if (glue.fixed_prompt_rows()) break;
    } catch (const std::exception&) {
    }
  }
  return capacity;
}

decoding::BatchCapacity Generator::batch_capacity(const BatchPlan& plan) {
  const GenerationSettings& settings = plan.settings;
  decoding::BatchCapacity capacity = plan.measured ? *plan.measured : measure_prompts(plan);
  // Slots for the sequences that can be in flight at once: a batch of B with fewer prompts
  // left than that would reserve KV cache for rows it never fills (the batch size still plans
  // the windows: it is part of every image's settings).
  capacity.sequences = slots_for(plan, settings.batch_size);
  const decoding::MethodConfig method = method_from_settings(settings);
  check_window_prior(bundle_);  // before the per-prompt requests, whose errors fail one image each
  resolve_cost_profile(bundle_, settings);  // a bad --cost-profile file fails here, not once per image
  capacity.window_nodes = decoding::window_nodes(decoding::largest_window(method));
  return capacity;
}

int Generator::slots_for(const BatchPlan& plan, int batch_size) {
  const auto pending = static_cast<int64_t>(plan.prompts.size());
  return static_cast<int>(std::clamp<int64_t>(pending, 1, std::max(batch_size, 1)));
}

int Generator::resolve_batch_size(BatchPlan& plan) {
  const bool automatic = plan.settings.batch_size == kAuto;
  int batch = automatic ? (placement_.device.is_cpu() ? 8 : 16) : plan.settings.batch_size;
  const decoding::BatchCapacity capacity = batch_capacity(plan);
  plan.measured = capacity;  // generate_batch reads it again rather than measuring every prompt twice
  decoding::BatchCapacity longest = capacity;
  if (automatic && plan.all_prompts.size() > plan.prompts.size()) {  // resumed: the finished prompts count too
    BatchPlan whole;
    whole.settings = plan.settings;
    whole.prompts = plan.all_prompts;
    longest = measure_prompts(whole);
  }
  decoding::DecodeRequest shape;  // the longest prompt's shape, for the estimate
  shape.rows.resize(static_cast<size_t>(longest.rows_per_sequence));
  shape.rows[0].tokens.assign(static_cast<size_t>(longest.prompt_tokens), 0);
  shape.method = method_from_settings(plan.settings);
  const family::TokenLayout& layout = family(plan.settings.resolution).layout();
  while (true) {
    try {
      // A batch size given is held to the slots it will fill. An automatic one is halved on the batch
      // size itself: it is part of every image's settings, which must not depend on how many are left.
      check_memory_fits(estimate_memory(shape, layout, automatic ? batch : slots_for(plan, batch)));
      return batch;
    } catch (const InputError& e) {
      if (!automatic || batch == 1) {
        throw InputError(std::string(e.what()) + " for a batch of " + std::to_string(batch) +
                         (batch > 1 ? " (a smaller --batch-size needs less)" : ""));
      }
      batch /= 2;
    }
  }
}

void Generator::generate_batch(const BatchPlan& plan, const std::function<std::optional<BatchItem>()>& next,
                               const std::function<void(const BatchItem&, GenerationOutput)>& done,
                               const std::function<void(const BatchItem&, const std::string& error)>& failed) {
  const decoding::BatchCapacity capacity = batch_capacity(plan);
  const family::TokenLayout& layout = family(plan.settings.resolution).layout();
  struct Started {
    BatchItem item;
    decoding::MethodConfig method;
    Clock::time_point start;
  };
  std::map<int64_t, Started> started;  // by request id
  int64_t request_id = 0;
  try {
    decoding::decode_batch(
        *model_, layout, capacity,
        [&]() -> std::optional<decoding::DecodeRequest> {
          while (std::optional<BatchItem> item = next()) {
            Started entry{std::move(*item), {}, Clock::now()};
            try {
              decoding::DecodeRequest request = make_request(entry.item.prompt, entry.item.settings, entry.method);
              if (!fits(request, capacity)) {  // too long for the memory even alone: say how much it needs
                check_memory_fits(estimate_memory(request, layout, 1));
                throw InputError("the prompt is longer than the batch was sized for");
              }
              request.id = request_id++;
              if (plan.on_step) {
                request.on_step = [&plan, id = entry.item.id](const decoding::StepProgress& p) { plan.on_step(id, p); };
              }
              started.emplace(request.id, std::move(entry));
              return request;
            } catch (const io::StorageError&) {
              throw;
            } catch (const std::exception& e) {
              failed(entry.item, e.what());
            }
          }
          return std::nullopt;
        },
        [&](const decoding::DecodeRequest& request, decoding::DecodeResult result) {
          Started entry = std::move(started.at(request.id));
          started.erase(request.id);
          GenerationOutput out = finish(entry.item.settings, entry.method, std::move(result));
          out.total_seconds = decoding::seconds_since(entry.start);
          done(entry.item, std::move(out));
        });
  } catch (const sampling::NonFiniteLogits&) {  // every row shares the weights: no image of the batch can be made
    throw overflow_error(bundle_, weights_, placement_.dtype);
  }
}

void Generator::check_memory(const GenerationShape& shape) const {
  GenerationShape with_graphs = shape;
  with_graphs.step_graphs = model_->step_graphs();
  check_memory_fits(estimate_generation_memory(bundle_.transformer, with_graphs, placement_.dtype));
}

void Generator::check_memory_fits(const MemoryEstimate& estimate) const {
  // The model's cache from an earlier run (compare's previous method) is the generation's to reuse or free.
  // A cache at least as large is kept whole rather than made again at the size asked for: counted so.
  MemoryEstimate held = estimate;
  const model::KvCache& cache = model_->cache();
  if (cache.rows() == estimate.kv_rows && cache.capacity() >= estimate.kv_capacity) {
    held.kv_cache = std::max(held.kv_cache, cache.bytes());
  }
  engine::check_memory_fits(held, memory_limit_, placement_.device, model_->held_bytes());
}

nlohmann::json Generator::window_planning(const GenerationSettings& settings) const {
  const decoding::MethodConfig method = method_from_settings(settings);
  if (!method.planned_windows()) return nullptr;
  const decoding::StepCostProfile profile = resolve_cost_profile(bundle_, settings);
  const std::vector<double> prior = resolve_window_prior(bundle_, settings, method);
  std::ostringstream step_cost;
  step_cost << profile.name() << " (crc32 " << std::hex << std::setw(8) << std::setfill('0')
            << io::png_crc32(profile.to_json().dump()) << ")";  // every point at full precision
  return {{"step_cost", step_cost.str()},
          {"window_prior", prior.empty() ? nlohmann::json("generic") : nlohmann::json(prior)}};
}

MemoryEstimate Generator::estimate_memory(const decoding::DecodeRequest& request, const family::TokenLayout& layout,
                                          int batch) const {
  GenerationShape shape;
  shape.rows = static_cast<int64_t>(request.rows.size()) * batch;
  for (const auto& row : request.rows) {
    shape.longest_prompt = std::max<int64_t>(shape.longest_prompt, static_cast<int64_t>(row.tokens.size()));
  }
  shape.image_tokens = layout.length();
  // The largest window the method may use (automatic ones included), as decode() sizes the cache.
  const decoding::WindowShape largest = decoding::largest_window(request.method);
  shape.window_nodes = decoding::window_nodes(largest);
  shape.sequences = batch;
  shape.draft_distributions = decoding::draft_distributions(request.method, largest, layout);
  shape.step_graphs = model_->step_graphs();
  shape.head_rows = static_cast<int64_t>(layout.emittable().size());  // the decode loop restricts the head to these
  const vq::VQConfig& vq = bundle_.vq;
  shape.vq_decode = vq_decode_bytes(layout.grid_height(), layout.grid_width(), vq.downsample,
                                    vq.ch * (vq.ch_mult.empty() ? 1 : vq.ch_mult.front()));
  return estimate_generation_memory(bundle_.transformer, shape, placement_.dtype);
}

}  // namespace sjd::engine
