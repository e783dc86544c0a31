#pragma once
// Small tokenizer.json files written by the BPE-engine tests, and a way to see
// an encoding as the token strings it consists of.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/test_support.h"
#include "text/tokenizer.h"

namespace sjd::text::testing {

// A tokenizer.json whose BPE vocabulary is `tokens` (ids in order) with no
// merges and ignore_merges set, so that a pre-tokenized piece comes out as one
// token exactly when the vocabulary has it: the encoding shows the pieces.
nlohmann::json piece_revealing_tokenizer(const std::vector<std::string>& tokens);

// A tokenizer.json with a BPE model from `tokens` and `merges` ("a b" strings).
nlohmann::json bpe_tokenizer(const std::vector<std::string>& tokens, const std::vector<std::string>& merges);

// Writes `document` into `dir` and loads it as kind "bpe".
std::unique_ptr<Tokenizer> load_bpe(const sjd::testing::TempDir& dir, const nlohmann::json& document,
                                    const std::string& name = "tokenizer.json");

// The token strings of `text`'s encoding, spelt as `document`'s vocabulary and added tokens spell them.
std::vector<std::string> token_strings(const Tokenizer& tokenizer, const nlohmann::json& document,
                                       const std::string& text);

}  // namespace sjd::text::testing
