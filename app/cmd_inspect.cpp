// `sjd inspect`: what a bundle holds, and the raw numbers parity tests compare
// with reference implementations (logits of a prompt + window, decoded pixels).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/cost_profiles.h"
#include "engine/generator.h"
#include "engine/memory_estimate.h"
#include "engine/outputs.h"
#include "engine/settings_checks.h"
#include "io/input_files.h"
#include "io/prompt_file.h"
#include "io/safetensors.h"
#include "text/closest_name.h"
#include "text/json_error.h"

namespace sjd::app {
namespace {

struct InspectArgs {
  std::string model;
  std::string logits_request;
  std::string decode_request;
  std::string out;
  bool trust_code = false;
};

// Ids a request names must be rows of the model's tables; lists must be short
// enough to fit (a request is a test fixture, not a generation).
constexpr size_t kMaxRequestTokens = 8192;
constexpr size_t kMaxRequestRows = 256;

// A list of integers in [0, limit). The errors call them `items` and say what `one` must be
// (default: "an id in [0, limit)").
std::vector<int64_t> ids_in(const nlohmann::json& value, int64_t limit, const std::string& where,
                            const std::string& items = "ids", std::string one = "") {
  if (one.empty()) one = "an id in [0, " + std::to_string(limit) + ")";
  if (!value.is_array() || value.size() > kMaxRequestTokens) {
    throw engine::InputError(where + ": expected a list of at most " + std::to_string(kMaxRequestTokens) + " " + items);
  }
  std::vector<int64_t> ids;
  for (const auto& id : value) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= limit) {
      throw engine::InputError(where + ": " + id.dump() + " is not " + one);
    }
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

// A request's keys are the ones named (a misspelt "widnow" would leave the window empty without a word).
void check_request_keys(const nlohmann::json& request, const std::vector<std::string>& known,
                        const std::string& where) {
  if (!request.is_object()) return;  // the caller names the expected form
  for (const auto& item : request.items()) {
    if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
    const auto guess = text::closest_name(item.key(), known);
    throw engine::InputError(where + ": /" + item.key() + ": unknown key" +
                             (guess ? " -- did you mean '" + *guess + "'?" : ""));
  }
}

// A row the family built from a request's text: held to a tokens row's bounds. Its ids come from the bundle's
// tokenizer, which may name ids past the transformer's vocabulary ("index out of range in self"), and its length
// from the text (a 100 KB text ran a forward of 24,000 tokens for minutes).
model::RowPrompt checked_family_row(model::RowPrompt row, const engine::Generator& generator,
                                    const std::string& where) {
  if (row.tokens.size() > kMaxRequestTokens) {
    throw engine::InputError(where + ": the text takes " + std::to_string(row.tokens.size()) +
                             " tokens, more than the " + std::to_string(kMaxRequestTokens) + " a request row may have");
  }
  try {
    engine::check_ids_in_vocabulary(row.tokens, generator.bundle());
  } catch (const engine::InputError& e) {
    throw engine::InputError(where + ": " + e.what());
  }
  return row;
}

// The text of a {"text"} or {"negative"} row: a prompt's rules (UTF-8, no NUL, at most 1 MiB) before it is
// tokenised.
std::string request_text(const nlohmann::json& value, const std::string& where) {
  if (!value.is_string()) throw engine::InputError(where + ": expected a string");
  const std::string text = value.get<std::string>();
  if (const std::string problem = io::prompt_text_problem(text); !problem.empty()) {
    throw engine::InputError(where + ": has " + problem);
  }
  return text;
}

// A row of a logits request: {"text": ...} through the family, {"uncond": true,
// "prompt": ...} for the family's unconditional row of that prompt, {"negative": ...}
// for the guidance row of a negative prompt (--negative-prompt), or raw
// {"tokens", "positions"?, "key_valid"?}.
model::RowPrompt request_row(engine::Generator& generator, const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw engine::InputError(where + ": expected an object");
  check_request_keys(j, {"text", "uncond", "prompt", "negative", "tokens", "positions", "key_valid"}, where);
  // One form per row: a key of another form would be dropped without a word ("text" beside "tokens").
  const bool by_text = j.contains("text"), by_uncond = j.contains("uncond") || j.contains("prompt");
  const bool by_negative = j.contains("negative");
  const bool by_tokens = j.contains("tokens") || j.contains("positions") || j.contains("key_valid");
  if (int{by_text} + int{by_uncond} + int{by_negative} + int{by_tokens} > 1) {
    throw engine::InputError(where + ": a row is {\"text\"}, {\"uncond\", \"prompt\"}, {\"negative\"} or {\"tokens\", "
                             "\"positions\", \"key_valid\"}, not a mix of them");
  }
  if (by_text) {
    return checked_family_row(generator.family().conditional(request_text(j["text"], where + ".text")), generator,
                              where);
  }
  if (by_negative) {
    if (!j["negative"].is_string() || j["negative"].get<std::string>().empty()) {
      throw engine::InputError(where + ".negative: expected a non-empty string");
    }
    const std::string text = j["negative"].get<std::string>();
    if (const std::string problem = engine::negative_prompt_problem(text); !problem.empty()) {
      throw engine::InputError(where + ".negative: " + problem);
    }
    return checked_family_row(generator.family().negative(text), generator, where);
  }
  if (by_uncond) {  // {"uncond": false} would otherwise be read as a row of tokens, which it names none of
    if (!j.contains("uncond") || j["uncond"] != true) {
      throw engine::InputError(where + ": the unconditional row is {\"uncond\": true, \"prompt\": ...}");
    }
    return checked_family_row(generator.family().unconditional(j.contains("prompt")
                                                                    ? request_text(j["prompt"], where + ".prompt")
                                                                    : std::string()),
                              generator, where);
  }
  model::RowPrompt row;
  row.tokens =
      ids_in(j.value("tokens", nlohmann::json()), generator.bundle().transformer.vocab_size, where + ".tokens");
  if (row.tokens.empty()) throw engine::InputError(where + ".tokens: must not be empty");
  for (size_t i = 0; i < row.tokens.size(); ++i) row.positions.push_back(static_cast<int64_t>(i));
  if (j.contains("positions")) {
    row.positions = ids_in(j["positions"], static_cast<int64_t>(kMaxRequestTokens), where + ".positions", "positions",
                           "a position in [0, " + std::to_string(kMaxRequestTokens) + ")");
  }
  row.key_valid.assign(row.tokens.size(), 1);
  if (j.contains("key_valid")) {  // 0 or 1 each: 300 was cut to a byte, 44
    const std::vector<int64_t> flags = ids_in(j["key_valid"], 2, where + ".key_valid", "flags", "0 or 1");
    row.key_valid.assign(flags.begin(), flags.end());
  }
  if (row.positions.size() != row.tokens.size() || row.key_valid.size() != row.tokens.size()) {
    throw engine::InputError(where + ": positions and key_valid must have one entry per token");
  }
  return row;
}

// The codes of a decode request: a non-empty rectangle of codebook indices.
at::Tensor request_codes(const nlohmann::json& request, int64_t codebook_size, const std::string& where) {
  const nlohmann::json& grid = request.at("codes");
  if (!grid.is_array() || grid.empty() || grid.size() > 1024) {
    throw engine::InputError(where + ".codes: expected 1 to 1024 rows of codes");
  }
  std::vector<int64_t> flat;
  for (size_t r = 0; r < grid.size(); ++r) {
    const std::vector<int64_t> row = ids_in(grid[r], codebook_size, where + ".codes[" + std::to_string(r) + "]");
    if (row.empty()) throw engine::InputError(where + ".codes[" + std::to_string(r) + "]: an empty row of codes");
    if (row.size() != grid[0].size()) {
      throw engine::InputError(where + ".codes[" + std::to_string(r) + "]: every row must have the first row's " +
                               std::to_string(grid[0].size()) + " codes");
    }
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return at::tensor(flat).view({static_cast<int64_t>(grid.size()), -1});
}

// The step-cost profiles automatic windows plan from, one line per device-dtype
// (each read as a generation reads it, so a bad entry fails here too).
void print_cost_profiles(const engine::Bundle& bundle) {
  const auto profiles = engine::bundle_cost_profiles(bundle);
  if (profiles.empty()) {
    std::cout << "windows  no measured step-cost profile: automatic windows plan from the generic one of the device\n";
  }
  for (const auto& [key, profile] : profiles) {
    const auto& curves = profile.curves();
    std::cout << "windows  " << key << " profile: " << curves.front().rows << "-" << curves.back().rows << " rows, "
              << curves.front().points.front().first << "-" << curves.front().points.back().first
              << " tokens per row (" << profile.name() << ")\n";
  }
}

int run_inspect(const InspectArgs& args) {
  engine::Bundle bundle = engine::load_bundle(args.model);
  bundle.trust_code = args.trust_code;
  if ((!args.logits_request.empty() || !args.decode_request.empty()) && args.out.empty()) {
    throw engine::InputError("--logits and --decode need --out FILE.safetensors");
  }
  if (!args.logits_request.empty() && !args.decode_request.empty()) {
    throw engine::InputError("give --logits or --decode, one at a time");
  }
  if (!args.out.empty() && args.logits_request.empty() && args.decode_request.empty()) {
    throw engine::InputError(
        "--out keeps what --logits or --decode computes; without either, inspect prints the bundle");
  }
  if (!args.out.empty()) engine::prepare_output_file(args.out, "--out");
  engine::check_outputs_apart({{"--out", args.out}},
                              {{"--logits", args.logits_request}, {"--decode", args.decode_request}}, args.model);
  engine::Generator generator(bundle);
  if (!args.logits_request.empty()) {
    const nlohmann::json request = engine::read_json_input(args.logits_request, "logits request");
    const std::string where = args.logits_request;
    check_request_keys(request, {"rows", "window"}, where);
    if (!request.is_object() || !request.contains("rows") || !request["rows"].is_array() || request["rows"].empty() ||
        request["rows"].size() > kMaxRequestRows) {
      throw engine::InputError(where + ": expected {\"rows\": [1 to " + std::to_string(kMaxRequestRows) +
                               " rows], \"window\": [ids]}");
    }
    std::vector<model::RowPrompt> rows;
    try {
      for (size_t r = 0; r < request["rows"].size(); ++r) {
        rows.push_back(request_row(generator, request["rows"][r], where + ": rows[" + std::to_string(r) + "]"));
      }
    } catch (const nlohmann::json::exception& e) {  // a value of the wrong type ("text": 5)
      throw engine::InputError(where + ": " + text::json_error_message(e));
    }
    const int64_t vocab = bundle.transformer.vocab_size;
    model::DraftTree window;
    for (int64_t token : ids_in(request.value("window", nlohmann::json::array()), vocab, where + ": window")) {
      window.push(token, static_cast<int>(window.size()) - 1);
    }
    // The forward's memory, as a generation's is held to it: 256 rows of 8192 tokens would take tens of GB.
    engine::GenerationShape shape;
    shape.rows = shape.sequences = static_cast<int64_t>(rows.size());
    for (const auto& r : rows) {
      shape.longest_prompt = std::max(shape.longest_prompt, static_cast<int64_t>(r.tokens.size()));
    }
    shape.image_tokens = shape.window_nodes = static_cast<int64_t>(window.size()) + 1;
    const engine::MemoryEstimate estimate = engine::estimate_generation_memory(bundle.transformer, shape, at::kFloat);
    engine::check_host_memory_fits(estimate.total(),
                                   where + ": the forward of these rows and window needs about " + estimate.describe());
    model::Transformer& transformer = generator.transformer();
    transformer.start(rows, 0, static_cast<int64_t>(window.size()) + 1);
    std::vector<int64_t> roots;
    for (const auto& r : rows) roots.push_back(r.tokens.back());
    io::write_safetensors(args.out, {{"logits", transformer.forward(roots, window).to(at::kCPU)}});
    std::cout << "wrote logits [rows, 1 + window, vocab] to " << args.out << "\n";
    return 0;
  }
  if (!args.decode_request.empty()) {
    const nlohmann::json request = engine::read_json_input(args.decode_request, "decode request");
    check_request_keys(request, {"codes"}, args.decode_request);
    if (!request.is_object() || !request.contains("codes")) {
      throw engine::InputError(args.decode_request + ": expected {\"codes\": [[...], ...]}");
    }
    const at::Tensor codes = request_codes(request, bundle.vq.codebook_size, args.decode_request);
    // A grid larger than the model's draws (a test fixture may) is held to the memory it decodes in.
    const vq::VQConfig& vq = bundle.vq;
    const int64_t needed = engine::vq_decode_bytes(codes.size(0), codes.size(1), vq.downsample,
                                                   vq.ch * (vq.ch_mult.empty() ? 1 : vq.ch_mult.front()));
    engine::check_host_memory_fits(needed, args.decode_request + ": decoding a " + std::to_string(codes.size(0)) + "x" +
                                               std::to_string(codes.size(1)) + " grid of codes needs about " +
                                               engine::format_bytes(needed));
    const at::Tensor image = generator.vq_decoder().decode_float(codes);
    io::write_safetensors(args.out, {{"image", image}});
    std::cout << "wrote decoded image [" << image.size(0) << ", " << image.size(1) << ", " << image.size(2) << "] to "
              << args.out << "\n";
    return 0;
  }
  const auto& t = bundle.transformer;
  const auto& layout = generator.family().layout();
  std::cout << "bundle   " << bundle.name << " (" << bundle.family << ") at " << bundle.dir.string() << "\n"
            << "model    " << t.num_layers << " layers, hidden " << t.hidden_size << ", heads " << t.num_heads << "/"
            << t.num_kv_heads << " x " << t.head_dim << ", mlp " << t.intermediate_size << ", vocab " << t.vocab_size
            << (t.qk_norm ? ", qk-norm" : "") << "\n"
            << "image    " << layout.grid_height() << "x" << layout.grid_width() << " codes -> "
            << generator.family().image_height() << "x" << generator.family().image_width() << " px, "
            << layout.length() << " generated tokens per image";
  if (const int64_t limit = generator.family().max_positions(); limit > 0) {
    std::cout << " (trained for " << limit << " positions: prompts up to " << limit - layout.length()
              << " tokens with the template, as tokenize --template counts them)";
  }
  std::cout << "\n";
  print_cost_profiles(bundle);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "describe a bundle; dump logits or decoded pixels for parity checks");
  cmd->add_option("--model,-m", args->model, "model bundle directory")->required();
  cmd->add_option("--logits", args->logits_request,
                  "JSON {\"rows\": [{\"text\": ...} | {\"uncond\": true, \"prompt\": ...} | {\"tokens\": [...]}], "
                  "\"window\": [ids]}");
  cmd->add_option("--decode", args->decode_request, "JSON {\"codes\": [[...], ...]}: decode with the bundle's VQ");
  cmd->add_option("--out", args->out, "safetensors file for --logits / --decode");
  add_trust_code_flag(*cmd, args->trust_code);
  cmd->callback([args]() { command_exit_code() = run_guarded([&] { return run_inspect(*args); }); });
}

}  // namespace sjd::app
