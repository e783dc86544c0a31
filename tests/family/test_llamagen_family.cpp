// LlamaGen's family glue: the image-only layout, the left-padded caption rows
// (mask, positions, projected embeddings), the unconditional row sharing the
// prompt's mask, T5 input ids (cleaning, truncation, </s>), resolution and
// bundle errors. A tiny T5 and caption projection are written here; the
// tokenizer is a word table standing in for SentencePiece (the family only
// needs encode() and the id of "</s>").
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>
#include <sstream>

#include "family/llamagen_family.h"
#include "io/safetensors.h"
#include "model/t5_encoder.h"
#include "testing/test_support.h"

using sjd::family::FamilyContext;
using sjd::testing::TempDir;

namespace {

constexpr int64_t kGrid = 4, kCodebook = 24, kCaption = 10, kHidden = 16, kT5Width = 8, kT5Vocab = 20;

// "</s>" is 1; each known word its own id; anything else 2 (unknown).
class WordTokenizer : public sjd::text::Tokenizer {
 public:
  std::vector<int64_t> encode(const std::string& text) const override {
    std::istringstream words(text);
    std::vector<int64_t> ids;
    for (std::string w; words >> w;) ids.push_back(vocabulary_.count(w) ? vocabulary_.at(w) : 2);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (const int64_t id : ids) {
      for (const auto& [word, known] : vocabulary_) {
        if (known == id) text += (text.empty() ? "" : " ") + word;
      }
    }
    return text;
  }
  std::optional<int64_t> token_id(const std::string& token) const override {
    if (token == "</s>") return 1;
    return vocabulary_.count(token) ? std::optional<int64_t>(vocabulary_.at(token)) : std::nullopt;
  }

 private:
  std::map<std::string, int64_t> vocabulary_ = {{"a", 3}, {"red", 4}, {"cat", 5}, {"on", 6}, {"the", 7}, {"mat", 8}};
};

struct Fixture {
  TempDir dir{"llamagen_family"};
  nlohmann::json bundle;
  std::map<std::string, at::Tensor> t5_tensors;
  sjd::io::WeightMap transformer;
  WordTokenizer tokenizer;

  Fixture() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    const auto normal = [&](at::IntArrayRef shape) { return at::normal(0.0, 0.5, shape, gen); };
    t5_tensors["shared.weight"] = normal({kT5Vocab, kT5Width});
    t5_tensors["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = normal({32, 2});
    const std::string p = "encoder.block.0.layer.";
    t5_tensors[p + "0.layer_norm.weight"] = 1.0 + normal({kT5Width});
    for (const char* w : {"q", "k", "v"}) t5_tensors[p + "0.SelfAttention." + w + ".weight"] = normal({8, kT5Width});
    t5_tensors[p + "0.SelfAttention.o.weight"] = normal({kT5Width, 8});
    t5_tensors[p + "1.layer_norm.weight"] = 1.0 + normal({kT5Width});
    t5_tensors[p + "1.DenseReluDense.wi_0.weight"] = normal({12, kT5Width});
    t5_tensors[p + "1.DenseReluDense.wi_1.weight"] = normal({12, kT5Width});
    t5_tensors[p + "1.DenseReluDense.wo.weight"] = normal({kT5Width, 12});
    t5_tensors["encoder.final_layer_norm.weight"] = 1.0 + normal({kT5Width});
    sjd::io::write_safetensors(dir / "t5_encoder.safetensors", t5_tensors);

    transformer.insert("cls_embedding.cap_proj.fc1.weight", normal({kHidden, kT5Width}), "gpt.safetensors");
    transformer.insert("cls_embedding.cap_proj.fc2.weight", normal({kHidden, kHidden}), "gpt.safetensors");
    transformer.insert("cls_embedding.uncond_embedding", normal({kCaption, kT5Width}), "gpt.safetensors");

    bundle = {
        {"transformer",
         {{"hidden_size", kHidden}, {"rope", "2d"}, {"grid_width", kGrid}, {"caption_length", kCaption}}},
        {"layout",
         {{"kind", "llamagen"}, {"grid_height", kGrid}, {"grid_width", kGrid}, {"image_token_first", 0},
          {"codebook_size", kCodebook}}},
        {"text_encoder",
         {{"kind", "t5-encoder"}, {"weights", {"t5_encoder.safetensors"}}, {"vocab_size", kT5Vocab},
          {"d_model", kT5Width}, {"num_layers", 1}, {"num_heads", 2}, {"d_kv", 4}, {"d_ff", 12}}}};
  }

  FamilyContext context(int64_t resolution = 0, bool with_weights = true) const {
    FamilyContext c;
    c.family = "llamagen";
    c.bundle = bundle;
    c.bundle_dir = dir.path();
    c.where = "b/bundle.json";
    c.tokenizer = &tokenizer;
    c.weights = with_weights ? &transformer : nullptr;
    c.vocab_size = kCodebook;
    c.downsample = 8;
    c.resolution = resolution;
    return c;
  }

  // fc2(gelu_tanh(fc1 x)) written out.
  at::Tensor project(const at::Tensor& x) const {
    const at::Tensor h = at::matmul(x, transformer.get("cls_embedding.cap_proj.fc1.weight").t());
    const at::Tensor gelu = 0.5 * h * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (h + 0.044715 * h.pow(3))));
    return at::matmul(gelu, transformer.get("cls_embedding.cap_proj.fc2.weight").t());
  }

  at::Tensor t5(const std::vector<int64_t>& ids) const {
    sjd::io::WeightMap w;
    for (const auto& [name, tensor] : t5_tensors) w.insert(name, tensor, "t5");
    const auto config = sjd::model::parse_t5_config(bundle["text_encoder"], "text_encoder");
    return sjd::model::T5Encoder(config, w).encode(ids);
  }
};

std::vector<uint8_t> left_padded_mask(int64_t valid) {
  std::vector<uint8_t> mask(static_cast<size_t>(kCaption - valid), 0);
  mask.resize(static_cast<size_t>(kCaption), 1);
  return mask;
}

}  // namespace

TEST_CASE("llamagen layout: grid*grid image codes, nothing forced, id = code", "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  const auto& layout = family->layout();
  REQUIRE(layout.length() == kGrid * kGrid);
  for (int64_t t = 0; t < layout.length(); ++t) {
    CHECK(layout.forced(t) == -1);
    CHECK(layout.cell(t) == t);
    CHECK(layout.constraint(t).allowed.sum().item<int64_t>() == kCodebook);
  }
  std::vector<int64_t> generated;
  for (int64_t t = 0; t < kGrid * kGrid; ++t) generated.push_back((t * 7) % kCodebook);
  const at::Tensor codes = layout.codes(generated);
  CHECK(codes[1][2].item<int64_t>() == generated[1 * kGrid + 2]);
  CHECK(codes[3][0].item<int64_t>() == generated[3 * kGrid]);
  CHECK(family->image_height() == kGrid * 8);
  CHECK(family->image_width() == kGrid * 8);
  CHECK(family->cfg_mix() == sjd::sampling::CfgMix::kLogits);
}

TEST_CASE("llamagen T5 ids: cleaned caption, truncated to caption_length - 1, then </s>", "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  CHECK(family->prompt_ids("  A RED   cat ", true) == std::vector<int64_t>{3, 4, 5, 1});
  CHECK(family->prompt_ids("A red cat", false) == std::vector<int64_t>{2, 4, 5});  // raw: "A" is not "a"
  const std::vector<int64_t> long_ids = family->prompt_ids("a red cat on the mat a red cat on the mat", true);
  CHECK(long_ids == std::vector<int64_t>{3, 4, 5, 6, 7, 8, 3, 4, 5, 1});
  CHECK(family->prompt_ids("", true) == std::vector<int64_t>{1});
  // The part the model will not see is named.
  CHECK(family->prompt_warning("a red cat on the mat a red cat on the mat") ==
        "the caption takes 12 T5 tokens and the model reads the first 9 (transformer.caption_length 10 with </s>): "
        "it will not see \"on the mat\"; shorten the prompt");
  CHECK(family->prompt_warning("a red cat on the mat a red cat").empty());  // 9 tokens: all seen
  // A long remainder is shown by its start and end.
  std::string many = "a red cat on the mat a red cat";
  for (int i = 0; i < 12; ++i) many += " on the mat";
  CHECK(family->prompt_warning(many + " red cat").find("it will not see \"on the mat on the mat on the...n the mat on the mat "
                                                     "red cat\"") != std::string::npos);
}

TEST_CASE("llamagen conditional row: left-padded projected T5 caption, masked pads, no rotation",
          "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  const sjd::model::RowPrompt row = family->conditional("a red cat");
  const std::vector<int64_t> ids = {3, 4, 5, 1};
  REQUIRE(row.tokens.size() == static_cast<size_t>(kCaption));
  CHECK(row.positions == std::vector<int64_t>(kCaption, -1));
  CHECK(row.key_valid == left_padded_mask(4));
  REQUIRE(row.embeddings.sizes() == at::IntArrayRef({kCaption, kHidden}));
  CHECK(row.embeddings.narrow(0, 0, kCaption - 4).abs().max().item<double>() == 0.0);
  const at::Tensor want = f.project(f.t5(ids));
  CHECK(at::allclose(row.embeddings.narrow(0, kCaption - 4, 4), want, 1e-5, 1e-6));
}

TEST_CASE("llamagen unconditional row: uncond_embedding projected, with the prompt's caption mask",
          "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  const sjd::model::RowPrompt cond = family->conditional("a red cat on the mat");  // 7 T5 tokens
  const sjd::model::RowPrompt uncond = family->unconditional("a red cat on the mat");
  CHECK(uncond.key_valid == cond.key_valid);
  CHECK(uncond.key_valid == left_padded_mask(7));
  CHECK(uncond.positions == std::vector<int64_t>(kCaption, -1));
  CHECK(at::allclose(uncond.embeddings, f.project(f.transformer.get("cls_embedding.uncond_embedding")), 1e-5, 1e-6));
  CHECK(family->unconditional("cat").key_valid == left_padded_mask(2));
}

TEST_CASE("llamagen negative row: the text's conditional row, kept for the next image, never another text's",
          "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  for (const std::string text : {"a blue sky", "a blue sky", "grey fog", "a blue sky"}) {
    INFO(text);
    const sjd::model::RowPrompt negative = family->negative(text);
    const sjd::model::RowPrompt conditional = family->conditional(text);
    CHECK(negative.key_valid == conditional.key_valid);
    CHECK(at::equal(negative.embeddings, conditional.embeddings));
    negative.embeddings.fill_(7.0f);  // a request may change its own rows; the kept one stays
  }
  CHECK(at::equal(family->negative("grey fog").embeddings, family->conditional("grey fog").embeddings));
}

TEST_CASE("llamagen prompt rows have one shape whatever the prompt, as fixed_prompt_rows says", "[family][llamagen]") {
  // A batch measures one LlamaGen prompt for all of them (Generator::batch_capacity), so prompts of
  // any length must give rows of the same length and positions, conditional and unconditional.
  Fixture f;
  const auto family = sjd::family::make_family(f.context());
  REQUIRE(family->fixed_prompt_rows());
  const sjd::model::RowPrompt short_row = family->conditional("cat");
  for (const std::string prompt : {"a red cat on the mat", "a very long caption that runs past the caption length"}) {
    INFO(prompt);
    for (const sjd::model::RowPrompt& row : {family->conditional(prompt), family->unconditional(prompt)}) {
      CHECK(row.tokens.size() == short_row.tokens.size());
      CHECK(row.positions == short_row.positions);
    }
  }
}

TEST_CASE("llamagen serves only its bundle's resolution", "[family][llamagen]") {
  Fixture f;
  CHECK(sjd::family::make_family(f.context(kGrid * 8))->image_width() == kGrid * 8);
  CHECK_THROWS_WITH(sjd::family::make_family(f.context(64)),
                    Catch::Contains("b/bundle.json: resolution 64 is not supported") &&
                        Catch::Contains("supported: 32"));
}

TEST_CASE("llamagen without weights only tokenises", "[family][llamagen]") {
  Fixture f;
  const auto family = sjd::family::make_family(f.context(0, /*with_weights=*/false));
  CHECK(family->prompt_ids("a cat", true) == std::vector<int64_t>{3, 5, 1});
  CHECK_THROWS_AS(family->conditional("a cat"), std::logic_error);
}

TEST_CASE("llamagen bundle errors name the key or tensor", "[family][llamagen][errors]") {
  Fixture f;
  SECTION("transformer grid differs from the layout") {
    f.bundle["transformer"]["grid_width"] = 5;
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("transformer.grid_width"));
  }
  SECTION("non-square grid") {
    f.bundle["layout"]["grid_height"] = 3;
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("square"));
  }
  SECTION("a kind that is no string") {  // was the JSON library's "type must be string", naming no key
    f.bundle["layout"]["kind"] = 5;
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("layout.kind: expected \"llamagen\""));
  }
  SECTION("image tokens past the vocabulary") {
    f.bundle["layout"]["codebook_size"] = 1000000000000000;
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()),
                      Catch::Contains("layout.image_token_first and codebook_size: 1000000000000000 image tokens "
                                      "from id 0 do not fit the vocabulary"));
  }
  SECTION("unknown layout key") {
    f.bundle["layout"]["newline_id"] = 3;
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("layout.newline_id: unknown key"));
  }
  SECTION("text encoder section") {
    f.bundle.erase("text_encoder");
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("text_encoder"));
  }
  SECTION("text encoder weights file") {
    f.bundle["text_encoder"]["weights"] = {"absent.safetensors"};
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()),
                      Catch::Contains("text_encoder.weights: not found") && Catch::Contains("absent.safetensors"));
  }
  SECTION("text encoder weights outside the bundle folder") {  // as every file a bundle names
    f.bundle["text_encoder"]["weights"] = {"../t5_encoder.safetensors"};
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("climbs out of"));
    f.bundle["text_encoder"]["weights"] = {(f.dir / "t5_encoder.safetensors").string()};
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()), Catch::Contains("must be a file name relative to"));
  }
  SECTION("a TorchScript text encoder runs code when loaded: only with --trust-code") {
    sjd::testing::write_file(f.dir / "t5.pt", "not opened");
    f.bundle["text_encoder"]["weights"] = {"t5.pt"};
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()),
                      Catch::Contains("t5.pt: TorchScript weights run code when loaded"));
    FamilyContext trusted = f.context();
    trusted.trust_code = true;  // then the archive is opened (and this one is not an archive)
    CHECK_THROWS_WITH(sjd::family::make_family(trusted), !Catch::Contains("run code"));
  }
  SECTION("a text encoder weight that is not finite or not floating point") {
    for (const bool integer : {false, true}) {
      std::map<std::string, at::Tensor> broken = f.t5_tensors;
      at::Tensor& norm = broken["encoder.final_layer_norm.weight"];
      norm = integer ? at::ones({kT5Width}, at::kInt) : norm.clone().index_fill_(0, at::tensor({int64_t{2}}), NAN);
      sjd::io::write_safetensors(f.dir / "t5_encoder.safetensors", broken);
      CHECK_THROWS_WITH(sjd::family::make_family(f.context()),
                        Catch::Contains("t5_encoder.safetensors: tensor 'encoder.final_layer_norm.weight'") &&
                            Catch::Contains(integer ? "must be floating point" : "holds NaN or infinite values"));
    }
  }
  SECTION("caption projection tensor") {
    sjd::io::WeightMap partial;
    partial.insert("cls_embedding.cap_proj.fc1.weight", at::zeros({kHidden, kT5Width}), "gpt.safetensors");
    partial.insert("cls_embedding.cap_proj.fc2.weight", at::zeros({kHidden, kHidden + 1}), "gpt.safetensors");
    f.transformer = std::move(partial);
    CHECK_THROWS_WITH(sjd::family::make_family(f.context()),
                      Catch::Contains("cls_embedding.cap_proj.fc2.weight") && Catch::Contains("[16, 17]"));
  }
}
