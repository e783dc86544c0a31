#include "text/tiktoken_tokenizer.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "text/base64.h"
#include "text/pair_merge.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::text {

const char* const kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Qwen's special tokens follow its 151,643 ranks.
constexpr int64_t kQwenEndOfText = 151643;
constexpr int kQwenExtraCount = 205;

std::string read_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw TokenizerError(file.string() + ": cannot open the tiktoken vocabulary");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

TiktokenTokenizer::TiktokenTokenizer(const std::filesystem::path& file, const JsonNode& options)
    : file_name_(file.string()), split_(kQwenSplitPattern, "tiktoken split pattern") {
  options.reject_unknown_keys({"special_tokens", "qwen_specials"});
  load_ranks(file);
  if (options.bool_or("qwen_specials", false)) {
    const JsonNode where = options.at("qwen_specials");
    add_special("<|endoftext|>", kQwenEndOfText, where);
    add_special("<|im_start|>", kQwenEndOfText + 1, where);
    add_special("<|im_end|>", kQwenEndOfText + 2, where);
    for (int i = 0; i < kQwenExtraCount; ++i) {
      add_special("<|extra_" + std::to_string(i) + "|>", kQwenEndOfText + 3 + i, where);
    }
  }
  if (const auto specials = options.find("special_tokens")) {
    specials->expect_object();
    for (const auto& item : specials->value().items()) {
      const JsonNode id = specials->at(item.key());
      add_special(item.key(), id.as_integer(), id);
    }
  }
}

void TiktokenTokenizer::load_ranks(const std::filesystem::path& file) {
  const std::string contents = read_whole_file(file);
  struct Entry {
    std::size_t offset, length;
    int64_t rank;
    std::size_t line;
  };
  std::vector<Entry> entries;
  entries.reserve(contents.size() / 12);
  token_bytes_.reserve(contents.size());
  std::size_t line_number = 0;
  for (std::size_t begin = 0; begin < contents.size();) {
    std::size_t end = contents.find('\n', begin);
    if (end == std::string::npos) end = contents.size();
    std::string_view line(contents.data() + begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;  // tiktoken skips blank lines
    const std::string where = file_name_ + ":" + std::to_string(line_number) + ": ";
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
      throw TokenizerError(where + "expected \"<base64 token> <rank>\"");
    }
    const std::size_t offset = token_bytes_.size();
    if (!base64_decode(line.substr(0, space), token_bytes_) || token_bytes_.size() == offset) {
      throw TokenizerError(where + "\"" + std::string(line.substr(0, space)) + "\" is not a base64 token");
    }
    const std::string_view rank_text = line.substr(space + 1);
    int64_t rank = -1;
    const auto [rank_end, error] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (error != std::errc() || rank_end != rank_text.data() + rank_text.size() || rank < 0) {
      throw TokenizerError(where + "rank \"" + std::string(rank_text) + "\" is not a non-negative integer");
    }
    entries.push_back({offset, token_bytes_.size() - offset, rank, line_number});
  }
  if (entries.empty()) throw TokenizerError(file_name_ + ": the tiktoken vocabulary has no tokens");
  rank_of_bytes_.reserve(entries.size());
  bytes_of_rank_.reserve(entries.size());
  for (const Entry& entry : entries) {
    const std::string_view bytes(token_bytes_.data() + entry.offset, entry.length);
    const auto [at, inserted] = rank_of_bytes_.emplace(bytes, entry.rank);
    if (!inserted) {
      throw TokenizerError(file_name_ + ":" + std::to_string(entry.line) + ": the token of rank " +
                           std::to_string(entry.rank) + " repeats the token of rank " + std::to_string(at->second));
    }
    if (!bytes_of_rank_.emplace(entry.rank, bytes).second) {
      throw TokenizerError(file_name_ + ":" + std::to_string(entry.line) + ": rank " + std::to_string(entry.rank) +
                           " is given to two tokens");
    }
  }
}

void TiktokenTokenizer::add_special(const std::string& name, int64_t id, const JsonNode& where) {
  if (name.empty()) where.fail("a special token needs a name");
  if (id < 0) where.fail("special token \"" + name + "\" has a negative id");
  if (bytes_of_rank_.count(id) != 0) {
    where.fail("special token \"" + name + "\" takes id " + std::to_string(id) + ", a rank of " + file_name_);
  }
  const auto same_name = special_ids_.find(name);
  if (same_name != special_ids_.end() && same_name->second != id) {
    where.fail("special token \"" + name + "\" is given ids " + std::to_string(same_name->second) + " and " +
               std::to_string(id));
  }
  const auto same_id = special_names_.find(id);
  if (same_id != special_names_.end() && same_id->second != name) {
    where.fail("special tokens \"" + same_id->second + "\" and \"" + name + "\" share id " + std::to_string(id));
  }
  special_ids_[name] = id;
  special_names_[id] = name;
  specials_.add(name, id);
}

std::string TiktokenTokenizer::normalized_input(const std::string& utf8) const {
  const std::size_t invalid = utf8::find_invalid(utf8);
  if (invalid != std::string::npos) {
    throw TokenizerError("tiktoken tokenizer (" + file_name_ + "): the text is not valid UTF-8 at byte " +
                         std::to_string(invalid + 1));
  }
  return unicode::normalize(utf8, unicode::NormalForm::NFC);
}

std::vector<int64_t> TiktokenTokenizer::encode(const std::string& utf8) const {
  const std::string text = normalized_input(utf8);
  std::vector<int64_t> ids;
  std::size_t done = 0;
  while (const auto special = specials_.find(text, done)) {
    encode_ordinary_into(std::string_view(text).substr(done, special->begin - done), ids);
    ids.push_back(special->value);
    done = special->end;
  }
  encode_ordinary_into(std::string_view(text).substr(done), ids);
  return ids;
}

std::vector<int64_t> TiktokenTokenizer::encode_ordinary(const std::string& utf8) const {
  std::vector<int64_t> ids;
  encode_ordinary_into(normalized_input(utf8), ids);
  return ids;
}

void TiktokenTokenizer::encode_ordinary_into(std::string_view text, std::vector<int64_t>& ids) const {
  // As tiktoken does, only what the pattern matches is encoded (Qwen's pattern matches everything).
  for (const auto& [begin, end] : split_.find_all(text)) encode_piece(text.substr(begin, end - begin), ids);
}

void TiktokenTokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  if (const auto whole = rank_of_bytes_.find(piece); whole != rank_of_bytes_.end()) {
    ids.push_back(whole->second);  // tiktoken's shortcut: a piece that is a token is never split
    return;
  }
  std::vector<MergeSymbol> symbols;
  symbols.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    const auto single = rank_of_bytes_.find(piece.substr(i, 1));
    if (single == rank_of_bytes_.end()) {
      throw TokenizerError(file_name_ + ": the vocabulary has no token for byte " +
                           std::to_string(static_cast<unsigned char>(piece[i])));
    }
    symbols.push_back({i, 1, single->second});
  }
  const auto rank_of = [&](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<PairMerge> {
    const auto found = rank_of_bytes_.find(piece.substr(left.start, left.length + right.length));
    if (found == rank_of_bytes_.end()) return std::nullopt;
    return PairMerge{found->second, found->second};
  };
  for (const MergeSymbol& symbol : merge_pairs(std::move(symbols), rank_of)) ids.push_back(symbol.id);
}

std::string TiktokenTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (const int64_t id : ids) {
    if (const auto rank = bytes_of_rank_.find(id); rank != bytes_of_rank_.end()) {
      bytes += rank->second;
    } else if (const auto special = special_names_.find(id); special != special_names_.end()) {
      bytes += special->second;
    } else {
      throw TokenizerError("tiktoken tokenizer (" + file_name_ + "): id " + std::to_string(id) +
                           " is neither a rank nor a special token");
    }
  }
  return utf8::to_valid(bytes);
}

std::optional<int64_t> TiktokenTokenizer::token_id(const std::string& token) const {
  if (const auto special = special_ids_.find(token); special != special_ids_.end()) return special->second;
  if (const auto rank = rank_of_bytes_.find(token); rank != rank_of_bytes_.end()) return rank->second;
  return std::nullopt;
}

}  // namespace sjd::text
