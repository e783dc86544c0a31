// load_tokenizer(): the kind named in a bundle's tokenizer section -> its engine;
// infer_tokenizer_kind(): the kind of a bare file, for `sjd tokenize --tokenizer`.
#include <fstream>

#include "text/byte_tokenizer.h"
#include "text/hf_bpe_tokenizer.h"
#include "text/json_node.h"
#include "text/spm_tokenizer.h"
#include "text/tiktoken_tokenizer.h"
#include "text/tokenizer.h"

namespace sjd::text {

namespace {

void check_file_size(const std::filesystem::path& file) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(file, error);
  if (!error && size > kMaxTokenizerFileBytes) {
    throw TokenizerError(file.string() + ": a tokenizer file of " + std::to_string(size >> 20) +
                         " MiB, more than one can be (at most " + std::to_string(kMaxTokenizerFileBytes >> 20) +
                         " MiB): is this the right file?");
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::filesystem::path& file,
                                          const nlohmann::json& options, const std::string& options_where) {
  const nlohmann::json no_options = nlohmann::json::object();
  // The options are the bundle's tokenizer section without its "kind" and "file", or tokenize's --options.
  const JsonNode node(options.is_null() ? no_options : options, options_where);
  node.expect_object();
  if (kind == "byte") return std::make_unique<ByteTokenizer>(node);
  check_file_size(file);
  if (kind == "tiktoken") return std::make_unique<TiktokenTokenizer>(file, node);
  if (kind == "bpe") return std::make_unique<HfBpeTokenizer>(file, node);
  if (kind == "spm") return std::make_unique<SpmTokenizer>(file, node);
  throw TokenizerError("tokenizer kind \"" + kind + "\" is unknown (" + known_tokenizer_kinds() + ")");
}

const std::vector<std::string>& tokenizer_kinds() {
  static const std::vector<std::string> kinds = {"byte", "tiktoken", "bpe", "spm"};
  return kinds;
}

std::string known_tokenizer_kinds() {
  std::string known = "known:";
  for (const std::string& kind : tokenizer_kinds()) known += (known.size() > 6 ? ", " : " ") + kind;
  return known;
}

std::string infer_tokenizer_kind(const std::filesystem::path& file) {
  const std::string extension = file.extension().string();
  if (extension == ".json") return "bpe";
  if (extension == ".tiktoken") return "tiktoken";
  if (extension == ".model") return "spm";
  std::ifstream in(file, std::ios::binary);
  std::string first_line;
  std::getline(in, first_line);
  if (!first_line.empty() && first_line[0] == '{') return "bpe";
  // A tiktoken file: "<base64 token> <rank>" per line.
  const size_t space = first_line.find(' ');
  const bool base64_then_rank =
      space != std::string::npos && space > 0 &&
      first_line.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == space &&
      space + 1 < first_line.size() && first_line.find_first_not_of("0123456789", space + 1) == std::string::npos;
  if (base64_then_rank) return "tiktoken";
  throw TokenizerError(file.string() +
                       ": cannot tell the tokenizer kind from the file; give --kind bpe, tiktoken or spm");
}

}  // namespace sjd::text
