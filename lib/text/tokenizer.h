#pragma once
// The one interface every text tokenizer of sjd implements, and the factory
// that builds one from a bundle's `tokenizer` section (see docs/bundles.md).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sjd::text {

// A tokenizer file that cannot be read or parsed, bad options, or text a
// tokenizer cannot take. The message names the file and the key or line.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of UTF-8 text. Special tokens in the text are recognised as the
  // kind defines (see load_tokenizer); nothing (no BOS/EOS) is added around it.
  virtual std::vector<int64_t> encode(const std::string& utf8) const = 0;
  // Text of ids, special tokens written out. Always valid UTF-8: byte sequences
  // that do not form UTF-8 become U+FFFD. Throws TokenizerError for an unknown id.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // The id of one token as the vocabulary spells it, added and special tokens included.
  virtual std::optional<int64_t> token_id(const std::string& token) const = 0;
};

// Tokenizer files are read whole, and tokenizer.json is parsed into several times its size: the largest
// released ones are a few MB (Llama 3's tokenizer.json 9 MB, Qwen's vocabulary 2.5 MB). Larger files are
// refused before they are read.
constexpr std::uintmax_t kMaxTokenizerFileBytes = std::uintmax_t{64} << 20;

// Builds a tokenizer of `kind`:
//  "byte"      UTF-8 bytes b -> first_id + b; options {"first_id": N}; no file.
//  "tiktoken"  `file` holds `base64(bytes) rank` lines (Qwen/Emu3). Text is NFC-normalised,
//              split with the Qwen regex, byte-pair merged by rank. Options:
//              {"special_tokens": {"<|endoftext|>": 151643, ...}} and/or {"qwen_specials": true}
//              (Qwen's <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0..204|>);
//              encode() matches these specials in the text.
//  "bpe"       `file` is a Hugging Face tokenizer.json with a BPE model; its added tokens
//              are matched in the text. No options.
//  "spm"       `file` is a SentencePiece model. No options.
// Throws TokenizerError naming the file and key for unreadable or malformed input;
// `options_where` names where the options come from in its messages.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::filesystem::path& file,
                                          const nlohmann::json& options,
                                          const std::string& options_where = "tokenizer options");

// The kinds load_tokenizer builds, and "known: byte, tiktoken, bpe, spm" for messages.
const std::vector<std::string>& tokenizer_kinds();
std::string known_tokenizer_kinds();

// The kind of a bare tokenizer file: by its name (.json -> bpe, .tiktoken ->
// tiktoken, .model -> spm), else by its start ('{' -> bpe, a "base64 rank"
// line -> tiktoken). Throws TokenizerError naming the file when neither tells.
std::string infer_tokenizer_kind(const std::filesystem::path& file);

}  // namespace sjd::text
