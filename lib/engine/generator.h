#pragma once
// A loaded model bundle ready to turn prompts into images: tokenizer, family
// glue, transformer, VQ decoder. One Generator serves many prompts.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoding/decoder.h"
#include "engine/bundle.h"
#include "engine/device.h"
#include "engine/memory_estimate.h"
#include "engine/settings.h"
#include "family/image_family.h"
#include "model/transformer.h"
#include "text/tokenizer.h"
#include "vq/vq_decoder.h"

namespace sjd::engine {

struct GenerationOutput {
  std::vector<int64_t> tokens;   // the generated sequence
  at::Tensor codes;              // int64 [grid_h, grid_w]
  at::Tensor image;              // uint8 [H, W, 3]
  decoding::RunStats stats;
  decoding::MethodConfig method;
  GenerationSettings settings;
  double vq_seconds = 0.0;
  double total_seconds = 0.0;
};

// One prompt of a batch run; `id` is the caller's (the prompt index).
struct BatchItem {
  int64_t id = 0;
  std::string prompt;
  GenerationSettings settings;  // the seed is the item's own; every other setting is the batch's
};

// What a batch run is sized for: its settings (batch_size resolved) and every
// prompt it may be given (the longest one sizes the KV cache's rows).
struct BatchPlan {
  GenerationSettings settings;
  // The prompts still to decode (a resumed batch leaves its finished ones out): the KV cache gets no more
  // sequence slots than there are, whatever the batch size, and rows as long as the longest needs.
  std::vector<std::string> prompts;
  // Every prompt of the run, finished ones too (empty: `prompts`). An automatic batch size is chosen for the
  // longest of them: with automatic windows it is part of every image's settings, so a resumed run must choose
  // what the first did.
  std::vector<std::string> all_prompts;
  // The prompts' longest rows, measured once by resolve_batch_size (tokenising a file of 200k captions, or
  // running LlamaGen's T5 encoder, takes seconds) and read again by generate_batch.
  std::optional<decoding::BatchCapacity> measured;
  // Called after every step of every item (its BatchItem::id and progress); may be empty.
  std::function<void(int64_t id, const decoding::StepProgress&)> on_step;
};

// The rows one prompt decodes: its conditional row, and with CFG the guidance row (the negative
// prompt's where one is set, else the family's unconditional row).
std::vector<model::RowPrompt> prompt_rows(const family::ImageFamily& glue, const std::string& prompt,
                                          const GenerationSettings& settings);

class Generator {
 public:
  // The transformer's weights go to `placement` (device and dtype) as they load. `tokenizer` is the
  // bundle's, when the caller has loaded it already (a large vocabulary takes a while); null: loaded here.
  explicit Generator(Bundle bundle, Placement placement = {}, std::unique_ptr<text::Tokenizer> tokenizer = nullptr);
  ~Generator();

  const Bundle& bundle() const { return bundle_; }
  // The family glue for a resolution (0 = the bundle's own), built on first use.
  const family::ImageFamily& family(int64_t resolution = 0);
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  model::Transformer& transformer() { return *model_; }
  const vq::VQDecoder& vq_decoder() const { return *vq_; }
  // Bytes one generation may use (0: the machine's available memory); checked
  // against an estimate before anything is allocated (memory_estimate.h).
  void set_memory_limit(int64_t bytes) { memory_limit_ = bytes; }
  // Throws InputError with the estimate when decoding this shape would not fit that limit.
  void check_memory(const GenerationShape& shape) const;

  // A warning when the model will not see all of `prompt` (family::ImageFamily::prompt_warning), or
  // when it and the image need more positions than the model was trained for (max_positions): the
  // model still runs there, as the reference code does, but what it draws past its training is not
  // to be trusted. Empty when it fits or is unknown, and when the prompt alone fills the positions
  // (a generation refuses that prompt, exit code 2).
  std::string context_warning(const std::string& prompt, const GenerationSettings& settings);

  // Where generate() sends context_warning's line, once the run is known to fit in memory (a prompt
  // too long for it is refused with one line, not warned about first). Empty: nowhere.
  void set_warning_handler(std::function<void(const std::string&)> handler) { on_warning_ = std::move(handler); }

  // `sequence` separates the random streams of several images made with one seed;
  // `on_step` (may be empty) is called after every decoding step (progress lines).
  GenerationOutput generate(const std::string& prompt, const GenerationSettings& settings, uint32_t sequence = 0,
                            const std::function<void(const decoding::StepProgress&)>& on_step = {});

  // What automatic windows read besides the settings -- the step-cost profile (its name and a CRC-32 of its
  // points) and the acceptance prior -- or null when the settings' windows are fixed: part of an image's
  // identity in batch and compare folders, since a recalibrated bundle would choose other windows.
  nlohmann::json window_planning(const GenerationSettings& settings) const;

  // The batch size a plan runs with: its setting, checked against the memory
  // limit, or for "auto" the device's default (8 on a CPU, 16 on a GPU) halved
  // until the estimate fits. Records the prompts' measure in plan.measured.
  int resolve_batch_size(BatchPlan& plan);
  // Continuous batching (decoding/decoder.h, decode_batch): decodes
  // plan.settings.batch_size items at once, pulling the next item from `next`
  // whenever one finishes. `done` gets each image as soon as it is made; an
  // item that cannot start (a prompt the model cannot take) goes to `failed`
  // and the batch carries on. Every image equals generate() of its prompt and
  // settings (batch_size included: automatic windows are planned for it).
  void generate_batch(const BatchPlan& plan, const std::function<std::optional<BatchItem>()>& next,
                      const std::function<void(const BatchItem&, GenerationOutput)>& done,
                      const std::function<void(const BatchItem&, const std::string& error)>& failed);

 private:
  // The decode request of one prompt (tokenized, checked), and the method it resolved to.
  decoding::DecodeRequest make_request(const std::string& prompt, const GenerationSettings& settings,
                                       decoding::MethodConfig& method);
  // The image and timings of a finished decode.
  GenerationOutput finish(const GenerationSettings& settings, const decoding::MethodConfig& method,
                          decoding::DecodeResult result);
  MemoryEstimate estimate_memory(const decoding::DecodeRequest& request, const family::TokenLayout& layout,
                                 int batch) const;
  decoding::BatchCapacity batch_capacity(const BatchPlan& plan);
  // The longest prompt row and position among the prompts that fit the memory alone.
  decoding::BatchCapacity measure_prompts(const BatchPlan& plan);
  // The KV cache's sequence slots for a plan at `batch_size`: the batch size, or fewer where fewer are pending.
  static int slots_for(const BatchPlan& plan, int batch_size);
  // Throws InputError when `estimate` does not fit the memory limit (memory_estimate.h).
  void check_memory_fits(const MemoryEstimate& estimate) const;

  Bundle bundle_;
  Placement placement_;
  int64_t memory_limit_ = 0;
  std::function<void(const std::string&)> on_warning_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  io::WeightMap weights_;  // kept: families may read tensors (LlamaGen's caption projection)
  std::map<int64_t, std::unique_ptr<family::ImageFamily>> families_;  // by resolution
  std::unique_ptr<model::Transformer> model_;
  std::unique_ptr<vq::VQDecoder> vq_;
  at::Tensor lantern_table_;  // neighbour table for the last lantern_k used
  int lantern_k_ = -1;
};

}  // namespace sjd::engine
