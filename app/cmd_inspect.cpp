// `sjd inspect`: what a bundle holds, and the raw numbers parity tests compare
// with reference implementations (logits of a prompt + window, decoded pixels).
#include <fstream>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "engine/generator.h"
#include "io/safetensors.h"

namespace sjd::app {
namespace {

struct InspectArgs {
  std::string model;
  std::string logits_request;
  std::string decode_request;
  std::string out;
};

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw engine::InputError(file + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw engine::InputError(file + ": invalid JSON: " + e.what());
  }
}

// A row of a logits request: {"text": ...} through the family, {"uncond": true,
// "prompt": ...} for the family's unconditional row of that prompt, or raw
// {"tokens", "positions"?, "key_valid"?}.
model::RowPrompt request_row(engine::Generator& generator, const nlohmann::json& j) {
  if (j.contains("text")) return generator.family().conditional(j["text"].get<std::string>());
  if (j.value("uncond", false)) return generator.family().unconditional(j.value("prompt", std::string()));
  model::RowPrompt row;
  row.tokens = j.at("tokens").get<std::vector<int64_t>>();
  for (size_t i = 0; i < row.tokens.size(); ++i) row.positions.push_back(static_cast<int64_t>(i));
  row.positions = j.value("positions", row.positions);
  row.key_valid = j.value("key_valid", std::vector<uint8_t>(row.tokens.size(), 1));
  return row;
}

int run_inspect(const InspectArgs& args) {
  engine::Bundle bundle = engine::load_bundle(args.model);
  engine::Generator generator(bundle);
  if (!args.logits_request.empty()) {
    const nlohmann::json request = read_json(args.logits_request);
    std::vector<model::RowPrompt> rows;
    for (const auto& r : request.at("rows")) rows.push_back(request_row(generator, r));
    model::DraftTree window;
    for (int64_t token : request.value("window", std::vector<int64_t>{})) {
      window.push(token, static_cast<int>(window.size()) - 1);
    }
    model::Transformer& transformer = generator.transformer();
    transformer.start(rows, 0, static_cast<int64_t>(window.size()) + 1);
    std::vector<int64_t> roots;
    for (const auto& r : rows) roots.push_back(r.tokens.back());
    io::write_safetensors(args.out, {{"logits", transformer.forward(roots, window)}});
    std::cout << "wrote logits [rows, 1 + window, vocab] to " << args.out << "\n";
    return 0;
  }
  if (!args.decode_request.empty()) {
    const nlohmann::json request = read_json(args.decode_request);
    const auto grid = request.at("codes").get<std::vector<std::vector<int64_t>>>();
    std::vector<int64_t> flat;
    for (const auto& row : grid) flat.insert(flat.end(), row.begin(), row.end());
    const at::Tensor codes = at::tensor(flat).view({static_cast<int64_t>(grid.size()), -1});
    io::write_safetensors(args.out, {{"image", generator.vq_decoder().decode_float(codes)}});
    std::cout << "wrote decoded image [3, H, W] to " << args.out << "\n";
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
            << layout.length() << " generated tokens per image\n";
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "describe a bundle; dump logits or decoded pixels for parity checks");
  cmd->add_option("--model,-m", args->model, "model bundle directory")->required();
  cmd->add_option("--logits", args->logits_request,
                  "JSON {\"rows\": [{\"text\": ...} | {\"uncond\": true, \"prompt\": ...} | {\"tokens\": [...]}], \"window\": [ids]}");
  cmd->add_option("--decode", args->decode_request, "JSON {\"codes\": [[...], ...]}: decode with the bundle's VQ");
  cmd->add_option("--out", args->out, "safetensors file for --logits / --decode");
  cmd->callback([args]() { command_exit_code() = run_guarded([&] { return run_inspect(*args); }); });
}

}  // namespace sjd::app
