// Parity with transformers' T5EncoderModel on a fixture written by
// tests/python/test_llamagen_parity.py (hidden: it needs SJD_T5_FIXTURE_DIR):
//   text_encoder.json      the bundle's text_encoder numbers
//   t5_encoder.safetensors shared.weight and encoder.* as saved by save_pretrained
//   cases.json             [{"ids": [...], "mask": [...]}, ...]
//   expected.safetensors   "case{i}": last_hidden_state [T, d_model] from transformers
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "io/safetensors.h"
#include "io/weights.h"
#include "model/t5_encoder.h"

TEST_CASE("the T5 encoder matches transformers' T5EncoderModel (fixture)", "[.][t5-fixture]") {
  const char* dir_env = std::getenv("SJD_T5_FIXTURE_DIR");
  REQUIRE(dir_env != nullptr);
  const std::filesystem::path dir(dir_env);
  std::ifstream config_in(dir / "text_encoder.json");
  std::ifstream cases_in(dir / "cases.json");
  REQUIRE(config_in);
  REQUIRE(cases_in);
  const sjd::model::T5Config config =
      sjd::model::parse_t5_config(nlohmann::json::parse(config_in), (dir / "text_encoder.json").string());
  const sjd::model::T5Encoder encoder(config, sjd::io::WeightMap::load(dir / "t5_encoder.safetensors"));
  const auto expected = sjd::io::read_safetensors(dir / "expected.safetensors").tensors;
  const nlohmann::json cases = nlohmann::json::parse(cases_in);
  REQUIRE(cases.size() == expected.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = cases[i].at("ids").get<std::vector<int64_t>>();
    const auto mask = cases[i].at("mask").get<std::vector<uint8_t>>();
    const at::Tensor got = encoder.encode(ids, mask);
    const at::Tensor want = expected.at("case" + std::to_string(i)).to(at::kFloat);
    REQUIRE(got.sizes() == want.sizes());
    // Pad rows are compared too: HF computes them as well (they attend to the valid tokens).
    const double error = (got - want).abs().max().item<double>();
    const double scale = want.abs().max().item<double>();
    std::cout << "t5 case " << i << ": " << ids.size() << " tokens, max |sjd - transformers| = " << error
              << " (max |value| " << scale << ")\n";
    CHECK(error < 1e-4);
  }
}
