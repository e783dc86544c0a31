#include "family/llamagen_family.h"

#include <c10/core/InferenceMode.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "io/input_files.h"
#include "io/json_fields.h"
#include "io/weight_checks.h"
#include "text/caption_cleaning.h"

namespace sjd::family {
namespace {

const std::set<std::string> kLayoutKeys = {"kind", "grid_height", "grid_width", "image_token_first", "codebook_size"};

const nlohmann::json& object(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_object()) throw std::invalid_argument(where + ": missing object \"" + key + "\"");
  return j[key];
}

std::vector<std::filesystem::path> weight_files(const nlohmann::json& section, const std::filesystem::path& dir,
                                                const std::string& where) {
  std::vector<std::string> names;
  if (section.contains("weights") && section["weights"].is_string()) {
    names.push_back(section["weights"].get<std::string>());
  } else if (section.contains("weights") && section["weights"].is_array() && !section["weights"].empty()) {
    for (const auto& f : section["weights"]) {
      if (!f.is_string()) throw std::invalid_argument(where + ".weights: expected file names, found " + f.dump());
      names.push_back(f.get<std::string>());
    }
  } else {
    throw std::invalid_argument(where + ".weights: expected a file name or a list of them");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& name : names) {  // inside the bundle folder, as every file a bundle names (docs/security.md)
    files.push_back(io::confined_path(dir, name, where + ".weights"));
    io::require_regular_file(files.back(), where + ".weights");
  }
  return files;
}

TokenLayout image_only_layout(const LlamaGenConfig& c, int64_t vocab_size) {
  const std::vector<int64_t> no_forced_tokens(static_cast<size_t>(c.grid_size * c.grid_size), -1);
  return TokenLayout(vocab_size, no_forced_tokens, c.grid_size, c.grid_size, c.first_code_id, c.codebook_size);
}

int64_t end_of_text_id(const text::Tokenizer& tokenizer) {
  const auto id = tokenizer.token_id("</s>");
  if (!id) {
    throw std::invalid_argument("LlamaGen: the tokenizer has no \"</s>\" piece (FLAN-T5's spiece.model ends every "
                                "caption with it)");
  }
  return *id;
}

}  // namespace

LlamaGenConfig parse_llamagen_config(const FamilyContext& context) {
  const std::string where = context.where + ": layout";
  const nlohmann::json& layout = object(context.bundle, "layout", context.where);
  for (const auto& item : layout.items()) {
    if (!kLayoutKeys.count(item.key())) throw std::invalid_argument(where + "." + item.key() + ": unknown key");
  }
  if (layout.contains("kind") && layout["kind"] != "llamagen") {
    throw std::invalid_argument(where + ".kind: expected \"llamagen\", found " + layout["kind"].dump());
  }
  LlamaGenConfig c;
  const int64_t grid_height = io::required_integer(layout, "grid_height", where, 1);
  c.grid_size = io::required_integer(layout, "grid_width", where, 1);
  check_grid_side(c.grid_size, where + ".grid_width");
  if (grid_height != c.grid_size) {
    throw std::invalid_argument(where + ": LlamaGen's grid is square (its 2D RoPE table is grid x grid), got " +
                                std::to_string(grid_height) + "x" + std::to_string(c.grid_size));
  }
  c.first_code_id = io::required_integer(layout, "image_token_first", where, 0);
  c.codebook_size = io::required_integer(layout, "codebook_size", where, 1);
  check_codes_in_vocabulary(c.first_code_id, c.codebook_size, context.vocab_size, where);
  c.downsample = context.downsample;
  if (c.downsample <= 0) throw std::invalid_argument(where + ": the VQ decoder's downsample factor is not set");

  const std::string twhere = context.where + ": transformer";
  const nlohmann::json& transformer = object(context.bundle, "transformer", context.where);
  if (transformer.value("rope", std::string()) != "2d") {
    throw std::invalid_argument(twhere + ".rope: LlamaGen needs \"2d\"");
  }
  if (io::required_integer(transformer, "grid_width", twhere, 1) != c.grid_size) {
    throw std::invalid_argument(twhere + ".grid_width: " + transformer["grid_width"].dump() +
                                " differs from layout.grid_width " + std::to_string(c.grid_size));
  }
  c.caption_length = io::required_integer(transformer, "caption_length", twhere, 1);

  const int64_t native = c.grid_size * c.downsample;
  if (context.resolution != 0 && context.resolution != native) {
    throw std::invalid_argument(context.where + ": resolution " + std::to_string(context.resolution) +
                                " is not supported by this LlamaGen bundle (supported: " + std::to_string(native) +
                                "; each LlamaGen checkpoint has its own resolution: export the 256 px stage-1 or "
                                "the 512 px stage-2 checkpoint for the other)");
  }
  return c;
}

CaptionEmbedder CaptionEmbedder::load(const io::WeightMap& w, int64_t hidden, int64_t caption_dim,
                                      int64_t caption_length) {
  const auto get = [&](const std::string& name, at::IntArrayRef shape) {
    return w.get(name, shape).to(at::kFloat).contiguous();
  };
  return {get("cls_embedding.cap_proj.fc1.weight", {hidden, caption_dim}),
          get("cls_embedding.cap_proj.fc2.weight", {hidden, hidden}),
          get("cls_embedding.uncond_embedding", {caption_length, caption_dim})};
}

at::Tensor CaptionEmbedder::project(const at::Tensor& caption) const {
  c10::InferenceMode inference_mode;
  return at::matmul(at::gelu(at::matmul(caption, fc1.t()), "tanh"), fc2.t());
}

LlamaGenFamily::LlamaGenFamily(LlamaGenConfig config, const text::Tokenizer& tokenizer, int64_t vocab_size,
                               std::shared_ptr<const model::T5Encoder> encoder, CaptionEmbedder embedder)
    : config_(config),
      tokenizer_(tokenizer),
      eos_id_(end_of_text_id(tokenizer)),
      layout_(image_only_layout(config_, vocab_size)),
      encoder_(std::move(encoder)),
      embedder_(std::move(embedder)) {}

std::vector<int64_t> LlamaGenFamily::caption_ids(const std::string& prompt) const {
  // language/t5.py runs its caption cleaner twice before tokenizing.
  return tokenizer_.encode(text::clean_caption(text::clean_caption(prompt)));
}

std::vector<int64_t> LlamaGenFamily::prompt_ids(const std::string& prompt, bool with_template) const {
  if (!with_template) return tokenizer_.encode(prompt);
  // The tokenizer truncates to max_length (= caption_length) including the </s> it appends.
  std::vector<int64_t> ids = caption_ids(prompt);
  if (static_cast<int64_t>(ids.size()) > config_.caption_length - 1) ids.resize(config_.caption_length - 1);
  ids.push_back(eos_id_);
  return ids;
}

std::string LlamaGenFamily::prompt_warning(const std::string& prompt) const {
  const std::vector<int64_t> ids = caption_ids(prompt);
  const int64_t kept = config_.caption_length - 1;  // and </s>
  if (static_cast<int64_t>(ids.size()) <= kept) return "";
  std::string dropped = tokenizer_.decode(std::vector<int64_t>(ids.begin() + kept, ids.end()));
  if (dropped.size() > 60) {  // its start and end, cut at characters' first bytes, not inside one
    const auto is_continuation = [&](size_t at) { return (static_cast<unsigned char>(dropped[at]) & 0xC0) == 0x80; };
    size_t head = 28, tail = dropped.size() - 28;
    while (head > 0 && is_continuation(head)) --head;
    while (tail < dropped.size() && is_continuation(tail)) ++tail;
    dropped = dropped.substr(0, head) + "..." + dropped.substr(tail);
  }
  return "the caption takes " + std::to_string(ids.size()) + " T5 tokens and the model reads the first " +
         std::to_string(kept) + " (transformer.caption_length " + std::to_string(config_.caption_length) +
         " with </s>): it will not see \"" + dropped + "\"; shorten the prompt";
}

model::RowPrompt LlamaGenFamily::caption_row(const at::Tensor& caption, int64_t valid) const {
  const int64_t slots = config_.caption_length;
  model::RowPrompt row;
  row.embeddings = embedder_.project(caption);
  row.tokens.assign(static_cast<size_t>(slots), config_.first_code_id);  // placeholders: the embeddings are the input
  row.positions.assign(static_cast<size_t>(slots), -1);                  // no rotation on caption slots
  row.key_valid.assign(static_cast<size_t>(slots - valid), 0);
  row.key_valid.resize(static_cast<size_t>(slots), 1);
  return row;
}

model::RowPrompt LlamaGenFamily::conditional(const std::string& prompt) const {
  if (!encoder_) throw std::logic_error("LlamaGen family built without weights cannot encode prompts");
  const std::vector<int64_t> ids = prompt_ids(prompt, /*with_template=*/true);
  const int64_t valid = static_cast<int64_t>(ids.size());
  // Encoding only the valid tokens equals the reference's padded batch: pad keys
  // are masked, and T5's relative bias depends only on distances.
  const at::Tensor encoded = encoder_->encode(ids);
  // Left padding: the valid rows at the end, zero rows before them.
  at::Tensor caption = at::zeros({config_.caption_length, encoded.size(1)}, at::kFloat);
  caption.narrow(0, config_.caption_length - valid, valid).copy_(encoded);
  return caption_row(caption, valid);
}

model::RowPrompt LlamaGenFamily::unconditional_row(int64_t valid) const {
  if (!encoder_) throw std::logic_error("LlamaGen family built without weights has no unconditional caption");
  if (valid < 1 || valid > config_.caption_length) {
    throw std::invalid_argument("LlamaGen: " + std::to_string(valid) + " valid caption tokens (expected 1.." +
                                std::to_string(config_.caption_length) + ")");
  }
  return caption_row(embedder_.uncond, valid);
}

model::RowPrompt LlamaGenFamily::unconditional(const std::string& prompt) const {
  return unconditional_row(static_cast<int64_t>(prompt_ids(prompt, /*with_template=*/true).size()));
}

model::RowPrompt LlamaGenFamily::negative(const std::string& text) const {
  const std::lock_guard<std::mutex> lock(negative_mutex_);
  if (!last_negative_ || last_negative_->first != text) last_negative_.emplace(text, conditional(text));
  model::RowPrompt row = last_negative_->second;
  row.embeddings = row.embeddings.clone();  // each request owns its rows' tensors
  return row;
}

std::unique_ptr<ImageFamily> make_llamagen_family(const FamilyContext& context) {
  const LlamaGenConfig config = parse_llamagen_config(context);
  if (context.weights == nullptr) {  // tokenising only
    return std::make_unique<LlamaGenFamily>(config, *context.tokenizer, context.vocab_size, nullptr, CaptionEmbedder{});
  }
  const std::string where = context.where + ": text_encoder";
  const nlohmann::json& section = object(context.bundle, "text_encoder", context.where);
  if (section.value("kind", std::string()) != "t5-encoder") {
    throw std::invalid_argument(where + ".kind: expected \"t5-encoder\"");
  }
  const model::T5Config t5 = model::parse_t5_config(section, where);
  const std::vector<std::filesystem::path> files = weight_files(section, context.bundle_dir, where);
  if (!context.trust_code) io::refuse_code_archives(files);
  io::WeightMap t5_weights = io::WeightMap::load_all(files);
  io::check_weights_usable(t5_weights, /*floating_only=*/true);
  auto encoder = std::make_shared<const model::T5Encoder>(t5, std::move(t5_weights));
  const int64_t hidden = io::required_integer(object(context.bundle, "transformer", context.where), "hidden_size",
                                             context.where + ": transformer", 1);
  CaptionEmbedder embedder = CaptionEmbedder::load(*context.weights, hidden, t5.d_model, config.caption_length);
  return std::make_unique<LlamaGenFamily>(config, *context.tokenizer, context.vocab_size, std::move(encoder),
                                          std::move(embedder));
}

}  // namespace sjd::family
