#include "family/lumina_family.h"

#include <algorithm>
#include <utility>
#include <stdexcept>
#include <vector>

#include "io/json_fields.h"

namespace sjd::family {
namespace {

// layout.resolutions: the image sides in pixels the model draws at besides its grid's (the release
// lists 512, 768 and 1024). Each names its entry when it is wrong: a side past what a grid can be
// once sized a grid of a billion codes.
std::vector<int64_t> parse_resolutions(const nlohmann::json& j, int64_t downsample, const std::string& where) {
  std::vector<int64_t> sides;
  if (!j.contains("resolutions")) return sides;
  const std::string key = where + ".resolutions";
  if (!j["resolutions"].is_array()) throw std::invalid_argument(key + ": expected an array of image sides in pixels");
  for (size_t i = 0; i < j["resolutions"].size(); ++i) {
    const nlohmann::json& value = j["resolutions"][i];
    const std::string at = key + "[" + std::to_string(i) + "]";
    if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
      throw std::invalid_argument(at + ": expected a positive integer (pixels), found " + value.dump());
    }
    const int64_t side = value.get<int64_t>();
    if (side % downsample != 0) {
      throw std::invalid_argument(at + ": " + std::to_string(side) + " px is not a multiple of the VQ's downsample (" +
                                  std::to_string(downsample) + ")");
    }
    check_grid_side(side / downsample, at);
    sides.push_back(side);
  }
  return sides;
}

// A `{name}` in the template that is none of {prompt}, {width} and {height} would reach the model as
// literal text: most likely a misspelt placeholder.
void check_template_placeholders(const std::string& text, const std::string& key) {
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    const size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const std::string name = text.substr(open + 1, close - open - 1);
    const bool identifier = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    });
    if (identifier && name != "prompt" && name != "width" && name != "height") {
      throw std::invalid_argument(key + ": unknown placeholder {" + name + "} (known: {prompt}, {width}, {height})");
    }
  }
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

LuminaConfig parse_lumina_config(const nlohmann::json& j, int64_t downsample, int64_t resolution,
                                 const std::string& where) {
  LuminaConfig c;
  if (j.contains("kind") && j["kind"] != "lumina-mgpt") {
    throw std::invalid_argument(where + ".kind: expected \"lumina-mgpt\", found " + j["kind"].dump());
  }
  c.grid_height = io::required_integer(j, "grid_height", where, 1);
  c.grid_width = io::required_integer(j, "grid_width", where, 1);
  c.downsample = downsample;
  c.image_token_first = io::required_integer(j, "image_token_first", where, 0);
  c.codebook_size = io::required_integer(j, "codebook_size", where, 1);
  c.bos_id = io::required_integer(j, "bos_id", where, 0);
  c.begin_image_id = io::required_integer(j, "begin_image_id", where, 0);
  c.end_image_id = io::required_integer(j, "end_image_id", where, 0);
  c.newline_id = io::required_integer(j, "newline_id", where, 0);
  c.end_of_turn_id = io::required_integer(j, "end_of_turn_id", where, 0);
  c.size_token_base = io::required_integer(j, "size_token_base", where, 0);
  check_grid_side(c.grid_height, where + ".grid_height");
  check_grid_side(c.grid_width, where + ".grid_width");
  c.size_token_unit_px = io::optional_integer(j, "size_token_unit_px", where, 32, 1);
  c.max_positions = io::optional_integer(j, "max_positions", where, c.max_positions, 1);
  if (j.contains("prompt_template") && !j["prompt_template"].is_string()) {
    throw std::invalid_argument(where + ".prompt_template: expected a string");
  }
  c.prompt_template = j.value("prompt_template", std::string("{prompt}"));
  // Without the placeholder every prompt would make the same picture.
  if (c.prompt_template.find("{prompt}") == std::string::npos) {
    throw std::invalid_argument(where + ".prompt_template: has no {prompt} placeholder");
  }
  check_template_placeholders(c.prompt_template, where + ".prompt_template");
  c.where = where;
  if (downsample <= 0) throw std::invalid_argument(where + ": the VQ's downsample must be positive");
  const std::vector<int64_t> allowed = parse_resolutions(j, downsample, where);
  if (resolution > 0 && resolution != c.grid_height * downsample) {
    if (std::find(allowed.begin(), allowed.end(), resolution) == allowed.end()) {
      std::vector<int64_t> supported = allowed;  // the grid's own side is always drawn
      supported.push_back(c.grid_height * downsample);
      std::sort(supported.begin(), supported.end());
      supported.erase(std::unique(supported.begin(), supported.end()), supported.end());
      std::string list;
      for (int64_t r : supported) list += (list.empty() ? "" : ", ") + std::to_string(r);
      throw std::invalid_argument(where + ": resolution " + std::to_string(resolution) +
                                  " is not supported (supported: " + list + ")");
    }
    c.grid_height = c.grid_width = resolution / downsample;
  }
  for (const int64_t side : {c.grid_height * downsample, c.grid_width * downsample}) {
    if (side % c.size_token_unit_px != 0) {
      throw std::invalid_argument(where + ": image side " + std::to_string(side) + " px is not a multiple of " +
                                  "size_token_unit_px (" + std::to_string(c.size_token_unit_px) + ")");
    }
  }
  return c;
}

namespace {
TokenLayout lumina_layout(const LuminaConfig& c, int64_t vocab_size) {
  const int64_t height_token = c.size_token_base + c.grid_height * c.downsample / c.size_token_unit_px;
  const int64_t width_token = c.size_token_base + c.grid_width * c.downsample / c.size_token_unit_px;
  // A structure id past the vocabulary would only fail deep in the sampler; name it here.
  const std::pair<const char*, int64_t> structure[] = {
      {"bos_id", c.bos_id},         {"begin_image_id", c.begin_image_id},  {"end_image_id", c.end_image_id},
      {"newline_id", c.newline_id}, {"end_of_turn_id", c.end_of_turn_id},  {"size_token_base", c.size_token_base},
      {"size_token_base (height token)", height_token}, {"size_token_base (width token)", width_token}};
  for (const auto& [key, id] : structure) {
    if (id < 0 || id >= vocab_size) {
      throw std::invalid_argument(c.where + "." + key + ": id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  check_codes_in_vocabulary(c.image_token_first, c.codebook_size, vocab_size, c.where);
  // A structure token among the image codes would be drawn as a code, and two structure tokens sharing an id
  // would make the rows say something else than the model was trained on: either is a bundle's typo.
  // The tokens a generation holds (size_token_base is only where the size tokens start), the size tokens last.
  const int64_t last_code = c.image_token_first + c.codebook_size - 1;
  const std::pair<const char*, int64_t> tokens[] = {
      {"bos_id", c.bos_id},         {"begin_image_id", c.begin_image_id}, {"end_image_id", c.end_image_id},
      {"newline_id", c.newline_id}, {"end_of_turn_id", c.end_of_turn_id},
      {"size_token_base (height token)", height_token}, {"size_token_base (width token)", width_token}};
  const size_t count = std::size(tokens);
  for (size_t i = 0; i < count; ++i) {
    const auto& [key, id] = tokens[i];
    if (id >= c.image_token_first && id <= last_code) {
      throw std::invalid_argument(c.where + "." + key + ": id " + std::to_string(id) + " lies inside the image codes " +
                                  std::to_string(c.image_token_first) + ".." + std::to_string(last_code));
    }
    for (size_t j = 0; j < i; ++j) {
      const bool height_and_width = i == count - 1 && j == count - 2;  // one id for a square image
      if (tokens[j].second == id && !height_and_width) {
        throw std::invalid_argument(c.where + "." + key + " and " + tokens[j].first + ": both are id " +
                                    std::to_string(id) + "; each structure token needs its own");
      }
    }
  }
  // The generated sequence: begin_image, height token, width token, rows of (codes + newline), end_image,
  // end_of_turn.
  std::vector<int64_t> forced = {c.begin_image_id, height_token, width_token};
  for (int64_t row = 0; row < c.grid_height; ++row) {
    forced.insert(forced.end(), static_cast<size_t>(c.grid_width), -1);
    forced.push_back(c.newline_id);
  }
  forced.push_back(c.end_image_id);
  forced.push_back(c.end_of_turn_id);
  return TokenLayout(vocab_size, std::move(forced), c.grid_height, c.grid_width, c.image_token_first, c.codebook_size);
}
}  // namespace

LuminaFamily::LuminaFamily(LuminaConfig config, const text::Tokenizer& tokenizer, int64_t vocab_size)
    : config_(std::move(config)), tokenizer_(tokenizer), layout_(lumina_layout(config_, vocab_size)) {
  // No prompt could go with an image that leaves fewer positions than the shortest prompt row takes (BOS, the
  // template around an empty prompt, end-of-turn): every generation would run past what the model was trained for.
  const int64_t fewest = static_cast<int64_t>(prompt_ids("", /*with_template=*/true).size());
  if (config_.max_positions > 0 && layout_.length() + fewest > config_.max_positions) {
    throw std::invalid_argument(
        config_.where + ".max_positions: " + std::to_string(config_.max_positions) +
        " positions leave none for the prompt: the image alone is " + std::to_string(layout_.length()) +
        " generated tokens at " + std::to_string(config_.grid_height * config_.downsample) + "x" +
        std::to_string(config_.grid_width * config_.downsample) +
        " px, and the prompt template with an empty prompt takes " + std::to_string(fewest));
  }
}

std::vector<int64_t> LuminaFamily::prompt_ids(const std::string& prompt, bool with_template) const {
  std::string text = prompt;
  if (with_template) {
    text = config_.prompt_template;
    replace_all(text, "{width}", std::to_string(image_width()));
    replace_all(text, "{height}", std::to_string(image_height()));
    replace_all(text, "{prompt}", prompt);
  }
  std::vector<int64_t> ids = tokenizer_.encode(text);
  if (with_template) {
    ids.insert(ids.begin(), config_.bos_id);
    ids.push_back(config_.end_of_turn_id);
  }
  return ids;
}

model::RowPrompt LuminaFamily::conditional(const std::string& prompt) const {
  model::RowPrompt row;
  row.tokens = prompt_ids(prompt, /*with_template=*/true);
  for (size_t i = 0; i < row.tokens.size(); ++i) row.positions.push_back(static_cast<int64_t>(i));
  row.key_valid.assign(row.tokens.size(), 1);
  return row;
}

model::RowPrompt LuminaFamily::unconditional(const std::string&) const {
  // The unconditional branch sees only what is generated, from begin-image at
  // position 0. A masked placeholder root (never attended to) starts it.
  model::RowPrompt row;
  row.tokens = {config_.bos_id};
  row.positions = {-1};
  row.key_valid = {0};
  return row;
}

}  // namespace sjd::family
