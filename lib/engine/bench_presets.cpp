// The architectures `sjd bench` times, at the sizes of the released models
// (docs/models.md): Lumina-mGPT 7B at 768 px, Emu3-Gen 8B at 720 px, LlamaGen
// T2I XL at 512 px; and a tiny one for the CPU check in CI.
#include "engine/bench_setup.h"

#include "engine/bundle.h"
#include "text/closest_name.h"

namespace sjd::engine {
namespace {

model::TransformerConfig llama(int64_t vocab, int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, int64_t intermediate) {
  model::TransformerConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = intermediate;
  return c;
}

BenchPreset lumina() {
  BenchPreset p;
  p.name = "lumina-7b-768";
  p.description = "Lumina-mGPT 7B (Chameleon), 768x768: 48x48 codes + row ends, CFG on logits";
  p.transformer = llama(65536, 4096, 32, 32, 32, 128, 11008);
  p.transformer.qk_norm = true;
  p.prompt_tokens = 40;
  p.generated_tokens = 2356;  // begin, h, w, 48 x (48 codes + newline), end image, end of turn
  p.grid = 48;
  p.first_code_id = 4;
  p.codebook_size = 8192;
  p.image_side = 768;
  p.cfg = 3.0;
  p.top_k = 2000;
  p.vq = {256, {512, 256, 256, 128, 128}, 3, false};
  return p;
}

BenchPreset emu3() {
  BenchPreset p;
  p.name = "emu3-8b-720";
  p.description = "Emu3-Gen 8B (GQA 32/8), 720x720: 90x90 codes + row ends, CFG on log-probs";
  p.transformer = llama(184622, 4096, 32, 32, 8, 128, 14336);
  p.transformer.rope_theta = 1e6;
  p.prompt_tokens = 40;
  p.generated_tokens = 8193;  // 90 x (90 codes + eol), eof, image end, eos
  p.grid = 90;
  p.first_code_id = 151854;
  p.codebook_size = 32768;
  p.image_side = 720;
  p.cfg = 3.0;
  p.cfg_mix = sampling::CfgMix::kLogProbs;
  p.top_k = 2048;
  p.vq = {4, {1024, 512, 512, 256}, 3, true};
  return p;
}

BenchPreset llamagen() {
  BenchPreset p;
  p.name = "llamagen-xl-512";
  p.description = "LlamaGen T2I XL (775M), 512x512: 120 caption slots, 32x32 codes, 2D RoPE";
  p.transformer = llama(16384, 1280, 36, 20, 20, 64, 3584);
  p.transformer.rope = model::RopeKind::k2d;
  p.transformer.key_style = model::KeyStyle::kLlamaGen;
  p.transformer.grid_width = 32;
  p.transformer.caption_length = 120;
  p.prompt_tokens = 120;
  p.generated_tokens = 1024;
  p.grid = 32;
  p.first_code_id = 0;
  p.codebook_size = 16384;
  p.image_side = 512;
  p.cfg = 7.5;
  p.top_k = 1000;
  p.vq = {8, {512, 256, 256, 128, 128}, 3, true};
  return p;
}

BenchPreset tiny() {
  BenchPreset p;
  p.name = "tiny";
  p.description = "a tiny Chameleon-shaped model (CI check that the bench runs)";
  p.transformer = llama(512, 64, 2, 4, 2, 16, 128);
  p.transformer.qk_norm = true;
  p.prompt_tokens = 8;
  p.generated_tokens = 256;
  p.grid = 16;
  p.first_code_id = 0;
  p.codebook_size = 512;
  p.image_side = 32;
  p.cfg = 3.0;
  p.top_k = 100;
  p.vq = {8, {64, 32}, 1, true};
  return p;
}

}  // namespace

const std::vector<std::string>& bench_preset_names() {
  static const std::vector<std::string> names = {"lumina-7b-768", "emu3-8b-720", "llamagen-xl-512", "tiny"};
  return names;
}

BenchPreset bench_preset(const std::string& name) {
  if (name == "lumina-7b-768") return lumina();
  if (name == "emu3-8b-720") return emu3();
  if (name == "llamagen-xl-512") return llamagen();
  if (name == "tiny") return tiny();
  throw InputError("--preset: " + text::unknown_name_message("preset", name, bench_preset_names()));
}

}  // namespace sjd::engine
