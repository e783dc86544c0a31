// load_tokenizer(): the kind named in a bundle's tokenizer section -> its engine.
#include "text/byte_tokenizer.h"
#include "text/hf_bpe_tokenizer.h"
#include "text/json_node.h"
#include "text/spm_tokenizer.h"
#include "text/tiktoken_tokenizer.h"
#include "text/tokenizer.h"

namespace sjd::text {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::filesystem::path& file,
                                          const nlohmann::json& options) {
  const nlohmann::json no_options = nlohmann::json::object();
  // The options may be the bundle's whole tokenizer section, so its "kind" and "file" are allowed in it.
  const JsonNode node(options.is_null() ? no_options : options, "tokenizer options");
  node.expect_object();
  if (kind == "byte") return std::make_unique<ByteTokenizer>(node);
  if (kind == "tiktoken") return std::make_unique<TiktokenTokenizer>(file, node);
  if (kind == "bpe") return std::make_unique<HfBpeTokenizer>(file, node);
  if (kind == "spm") return std::make_unique<SpmTokenizer>(file, node);
  throw TokenizerError("tokenizer kind \"" + kind + "\" is unknown (known: byte, tiktoken, bpe, spm)");
}

}  // namespace sjd::text
