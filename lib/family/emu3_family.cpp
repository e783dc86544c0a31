#include "family/emu3_family.h"

#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "io/json_fields.h"

namespace sjd::family {
namespace {

const std::set<std::string> kLayoutKeys = {"kind",   "image_area",      "max_positions",   "codebook_size",
                                           "tokens", "positive_prompt", "negative_prompt", "size_template"};
const std::set<std::string> kTokenKeys = {"bos", "eos", "image_start",  "image_end",  "image_token",
                                          "eol", "eof", "visual_first", "visual_last"};

std::string text(const nlohmann::json& j, const std::string& key, const std::string& where, bool allow_empty) {
  if (!j.contains(key) || !j[key].is_string() || (!allow_empty && j[key].get<std::string>().empty())) {
    throw std::invalid_argument(where + "." + key + ": expected a " + (allow_empty ? "" : "non-empty ") + "string" +
                                (j.contains(key) ? ", found " + j[key].dump() : " (missing)"));
  }
  return j[key].get<std::string>();
}

void reject_unknown(const nlohmann::json& j, const std::set<std::string>& known, const std::string& where) {
  for (const auto& item : j.items()) {
    if (!known.count(item.key())) throw std::invalid_argument(where + "." + item.key() + ": unknown key");
  }
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

int64_t generated_length(int64_t grid_height, int64_t grid_width) { return grid_height * (grid_width + 1) + 3; }

}  // namespace

int64_t emu3_grid_side(double image_area, int64_t downsample) {
  // std::nearbyint rounds halves to even under the default rounding mode, like Python's round().
  return static_cast<int64_t>(std::nearbyint(std::sqrt(image_area) / static_cast<double>(downsample)));
}

Emu3Config parse_emu3_config(const nlohmann::json& j, int64_t downsample, int64_t resolution,
                             const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object");
  reject_unknown(j, kLayoutKeys, where);
  if (j.contains("kind") && j["kind"] != "emu3") {
    throw std::invalid_argument(where + ".kind: expected \"emu3\", found " + j["kind"].dump());
  }
  if (downsample <= 0) throw std::invalid_argument(where + ": the VQ decoder's downsample factor is not set");
  Emu3Config c;
  c.downsample = downsample;
  c.codebook_size = io::required_integer(j, "codebook_size", where, 1);
  c.max_positions = io::required_integer(j, "max_positions", where, 1);
  const int64_t image_area = io::required_integer(j, "image_area", where, 1);
  if (!j.contains("tokens") || !j["tokens"].is_object()) {
    throw std::invalid_argument(where + ".tokens: expected an object of special-token names");
  }
  const nlohmann::json& t = j["tokens"];
  const std::string tw = where + ".tokens";
  reject_unknown(t, kTokenKeys, tw);
  c.names = {text(t, "bos", tw, false),         text(t, "eos", tw, false),        text(t, "image_start", tw, false),
             text(t, "image_end", tw, false),   text(t, "image_token", tw, false), text(t, "eol", tw, false),
             text(t, "eof", tw, false),         text(t, "visual_first", tw, false),
             text(t, "visual_last", tw, false)};
  c.positive_prompt = text(j, "positive_prompt", where, true);
  c.negative_prompt = text(j, "negative_prompt", where, true);
  c.size_template = j.contains("size_template") ? text(j, "size_template", where, false) : "{H}*{W}";

  int64_t side = emu3_grid_side(static_cast<double>(image_area), downsample);
  if (side < 1) throw std::invalid_argument(where + ".image_area: " + std::to_string(image_area) + " gives no grid");
  if (resolution > 0) {
    if (resolution % downsample != 0) {
      const int64_t below = resolution / downsample * downsample;
      throw std::invalid_argument("resolution " + std::to_string(resolution) + " is not supported by " + where +
                                  ": Emu3 images are whole " + std::to_string(downsample) +
                                  "-pixel VQ cells (nearest: " +
                                  (below > 0 ? std::to_string(below) + " or " : std::string()) +
                                  std::to_string(below + downsample) + ")");
    }
    side = resolution / downsample;
  }
  if (generated_length(side, side) > c.max_positions) {
    throw std::invalid_argument("resolution " + std::to_string(side * downsample) + " is not supported by " + where +
                                ": its " + std::to_string(generated_length(side, side)) +
                                " generated tokens exceed the model's " + std::to_string(c.max_positions) +
                                " positions (max_positions)");
  }
  c.grid_height = c.grid_width = side;
  return c;
}

Emu3Ids resolve_emu3_ids(const Emu3Config& c, const text::Tokenizer& tokenizer, const std::string& where) {
  auto id_of = [&](const std::string& key, const std::string& name) {
    const auto id = tokenizer.token_id(name);
    // The template is tokenised as text, so the name must also come back as this one token.
    if (!id || tokenizer.encode(name) != std::vector<int64_t>{*id}) {
      throw std::invalid_argument(where + ".tokens." + key + ": \"" + name +
                                  "\" is not a special token of the bundle's tokenizer");
    }
    return *id;
  };
  Emu3Ids ids;
  ids.bos = id_of("bos", c.names.bos);
  ids.eos = id_of("eos", c.names.eos);
  ids.image_start = id_of("image_start", c.names.image_start);
  ids.image_end = id_of("image_end", c.names.image_end);
  ids.image_token = id_of("image_token", c.names.image_token);
  ids.eol = id_of("eol", c.names.eol);
  ids.eof = id_of("eof", c.names.eof);
  ids.visual_first = id_of("visual_first", c.names.visual_first);
  const int64_t visual_last = id_of("visual_last", c.names.visual_last);
  // Emu3's constraint allows the id range first..last, one id per code.
  if (visual_last - ids.visual_first + 1 != c.codebook_size) {
    throw std::invalid_argument(where + ".tokens: visual tokens " + std::to_string(ids.visual_first) + ".." +
                                std::to_string(visual_last) + " are not codebook_size = " +
                                std::to_string(c.codebook_size) + " consecutive ids");
  }
  for (int64_t structure : {ids.eol, ids.eof, ids.image_end, ids.eos}) {
    if (structure >= ids.visual_first && structure <= visual_last) {
      throw std::invalid_argument(where + ".tokens: structure token id " + std::to_string(structure) +
                                  " lies inside the visual tokens");
    }
  }
  return ids;
}

namespace {

// The generated sequence: grid_height rows of (grid_width codes + eol), eof, image_end, eos.
TokenLayout make_emu3_layout(const Emu3Config& c, const Emu3Ids& ids, int64_t vocab_size) {
  std::vector<int64_t> forced;
  forced.reserve(static_cast<size_t>(generated_length(c.grid_height, c.grid_width)));
  for (int64_t row = 0; row < c.grid_height; ++row) {
    forced.insert(forced.end(), static_cast<size_t>(c.grid_width), -1);
    forced.push_back(ids.eol);
  }
  forced.push_back(ids.eof);
  forced.push_back(ids.image_end);
  forced.push_back(ids.eos);
  return TokenLayout(vocab_size, std::move(forced), c.grid_height, c.grid_width, ids.visual_first, c.codebook_size);
}

}  // namespace

Emu3Family::Emu3Family(Emu3Config config, const text::Tokenizer& tokenizer, int64_t vocab_size,
                       const std::string& where)
    : config_(std::move(config)),
      tokenizer_(tokenizer),
      ids_(resolve_emu3_ids(config_, tokenizer, where)),
      layout_(make_emu3_layout(config_, ids_, vocab_size)) {}

std::vector<int64_t> Emu3Family::template_ids(const std::string& text) const {
  std::string size = config_.size_template;
  replace_all(size, "{H}", std::to_string(config_.grid_height));
  replace_all(size, "{W}", std::to_string(config_.grid_width));
  // One text, special-token names included, tokenised in one go as Emu3's processor does.
  return tokenizer_.encode(config_.names.bos + text + config_.names.image_start + size + config_.names.image_token);
}

std::vector<int64_t> Emu3Family::prompt_ids(const std::string& prompt, bool with_template) const {
  return with_template ? template_ids(prompt + config_.positive_prompt) : tokenizer_.encode(prompt);
}

model::RowPrompt Emu3Family::row_of(const std::vector<int64_t>& tokens) {
  model::RowPrompt row;
  row.tokens = tokens;
  for (size_t i = 0; i < row.tokens.size(); ++i) row.positions.push_back(static_cast<int64_t>(i));
  row.key_valid.assign(row.tokens.size(), 1);
  return row;
}

model::RowPrompt Emu3Family::conditional(const std::string& prompt) const {
  return row_of(prompt_ids(prompt, /*with_template=*/true));
}

// The negative prompt takes the prompt's place; the positive suffix is not added to it.
model::RowPrompt Emu3Family::negative(const std::string& text) const { return row_of(template_ids(text)); }

model::RowPrompt Emu3Family::unconditional(const std::string&) const { return negative(config_.negative_prompt); }

std::unique_ptr<ImageFamily> make_emu3_family(const FamilyContext& context) {
  const std::string where = context.where + ": layout";
  const nlohmann::json layout = context.bundle.value("layout", nlohmann::json::object());
  if (context.tokenizer == nullptr) throw std::invalid_argument(where + ": the Emu3 family needs a tokenizer");
  return std::make_unique<Emu3Family>(parse_emu3_config(layout, context.downsample, context.resolution, where),
                                      *context.tokenizer, context.vocab_size, where);
}

}  // namespace sjd::family
