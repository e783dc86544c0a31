// `sjd tokenize`: the prompt ids a model sees, or a bare tokenizer file's ids,
// to check our tokenizers against the reference ones (like llama.cpp's tokenize tool).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/bundle.h"
#include "family/image_family.h"
#include "io/input_files.h"
#include "text/closest_name.h"
#include "text/json_lines.h"
#include "text/strict_json.h"
#include "text/utf8.h"

namespace sjd::app {
namespace {

struct TokenizeArgs {
  std::string model;
  bool with_template = false;
  std::string tokenizer_file;
  std::string kind;
  std::string options = "{}";
  std::string json_lines;
  std::string text;
  bool text_given = false;  // "" is a text too: tokenize "" prints []
  bool options_given = false;
};

// Flags that would be ignored in the combination given are refused, naming what goes together.
void check_combination(const TokenizeArgs& args) {
  // An unknown --kind fell through to "give --model DIR, or --tokenizer FILE", naming neither it nor the kinds.
  const std::vector<std::string>& kinds = text::tokenizer_kinds();
  if (!args.kind.empty() && std::find(kinds.begin(), kinds.end(), args.kind) == kinds.end()) {
    const auto guess = text::closest_name(args.kind, kinds);
    throw engine::InputError("--kind " + args.kind + ": unknown tokenizer kind (" + text::known_tokenizer_kinds() +
                             ")" + (guess ? "; did you mean '" + *guess + "'?" : ""));
  }
  if (!args.model.empty() && (!args.tokenizer_file.empty() || !args.kind.empty() || args.options_given)) {
    throw engine::InputError(
        "--model takes the bundle's own tokenizer: --tokenizer, --kind and --options go without it");
  }
  if (args.model.empty() && args.with_template)
    throw engine::InputError("--template goes with --model (a family's template)");
  if (args.kind == "byte" && !args.tokenizer_file.empty()) {
    throw engine::InputError("--kind byte reads no file: --tokenizer goes with bpe, tiktoken or spm");
  }
  if (!args.json_lines.empty() && args.text_given) {
    throw engine::InputError("give a text or --json-lines FILE, not both");
  }
  if (!args.json_lines.empty() && args.with_template) {
    throw engine::InputError("--json-lines tokenizes each line as plain text: --template goes with a text");
  }
}

void print_ids(const std::vector<int64_t>& ids) { std::cout << nlohmann::json(ids).dump() << "\n"; }

int run_tokenize(const TokenizeArgs& args) {
  check_combination(args);
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<engine::Bundle> bundle;
  if (!args.model.empty()) {
    bundle = std::make_unique<engine::Bundle>(engine::load_bundle(args.model));
    tokenizer = engine::load_bundle_tokenizer(*bundle);
  } else if (!args.tokenizer_file.empty() || args.kind == "byte") {
    nlohmann::json options;
    try {
      options = text::parse_strict_json(args.options, "--options");
    } catch (const text::StrictJsonError& e) {
      throw engine::InputError(e.what());
    }
    // A bundle's tokenizer section may hold these; here the flags say them, and an option would be ignored.
    for (const char* key : {"kind", "file"}) {
      if (options.is_object() && options.contains(key)) {
        throw engine::InputError(std::string("--options: \"") + key + "\" is given by --" +
                                 (std::string(key) == "kind" ? "kind" : "tokenizer"));
      }
    }
    if (!args.tokenizer_file.empty()) io::require_regular_file(args.tokenizer_file, "tokenizer file");
    const std::string kind = args.kind.empty() ? text::infer_tokenizer_kind(args.tokenizer_file) : args.kind;
    tokenizer = text::load_tokenizer(kind, args.tokenizer_file, options);
  } else {
    throw engine::InputError("give --model DIR, or --tokenizer FILE (--kind is taken from the file if left out)");
  }
  if (!args.text_given && args.json_lines.empty()) {
    throw engine::InputError("no text to tokenize: give it as the last argument (sjd tokenize -m DIR \"a red apple\") "
                             "or give --json-lines FILE");
  }
  if (!args.json_lines.empty()) {
    // Read a line at a time, but a line is tokenized whole: bounded as a tokenizer file is.
    io::require_file_at_most(args.json_lines, "JSON lines file", text::kMaxTokenizerFileBytes);
    std::ifstream in(args.json_lines);
    if (!in) throw engine::InputError(args.json_lines + ": cannot open");
    const std::vector<std::vector<int64_t>> lines = text::encode_json_lines(*tokenizer, in, args.json_lines);
    // Every id is checked before any is printed, as a text's are: a bundle's ids past the vocabulary are its error.
    for (size_t i = 0; bundle && i < lines.size(); ++i) {
      try {
        engine::check_ids_in_vocabulary(lines[i], *bundle);
      } catch (const engine::InputError& e) {
        throw engine::InputError(args.json_lines + ", string " + std::to_string(i + 1) + ": " + e.what());
      }
    }
    for (const auto& ids : lines) print_ids(ids);
    return 0;
  }
  // The text's fault, said as -p's is, where the tokenizer would name its own file as the culprit.
  if (const size_t bad = text::utf8::find_invalid(args.text); bad != std::string::npos) {
    throw engine::InputError("the text is not valid UTF-8 at byte " + std::to_string(bad + 1));
  }
  if (bundle) {
    const auto family = family::make_family(engine::family_context(*bundle, *tokenizer, nullptr, 0));
    const std::vector<int64_t> ids = family->prompt_ids(args.text, args.with_template);
    engine::check_ids_in_vocabulary(ids, *bundle);  // as generate refuses them: the bundle's error, not a result
    print_ids(ids);
  } else {
    print_ids(tokenizer->encode(args.text));
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "print the token ids of a text (a model's prompt, or a tokenizer file)");
  cmd->add_option("--model,-m", args->model, "model bundle: ids as that family builds the prompt");
  cmd->add_flag("--template", args->with_template, "with --model: include the prompt template and its special tokens");
  cmd->add_option("--tokenizer", args->tokenizer_file, "a bare tokenizer file (tokenizer.json, .tiktoken, .model)");
  cmd->add_option("--kind", args->kind,
                  "bpe | tiktoken | spm (with --tokenizer; default: from the file) | byte (no file; --options gives "
                  "first_id)");
  CLI::Option* options = cmd->add_option(
      "--options", args->options,
      "with --tokenizer or --kind byte: JSON options, e.g. {\"qwen_specials\": true} or {\"first_id\": 4}");
  cmd->add_option("--json-lines", args->json_lines,
                  "tokenize each JSON string line of this file, one id list per line");
  CLI::Option* text = cmd->add_option("text", args->text, "the text to tokenize");
  cmd->callback([args, text, options]() {
    args->text_given = text->count() > 0;
    args->options_given = options->count() > 0;
    command_exit_code() = run_guarded([&] { return run_tokenize(*args); });
  });
}

}  // namespace sjd::app
