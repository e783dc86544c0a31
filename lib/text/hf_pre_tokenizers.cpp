#include "text/hf_pre_tokenizers.h"

#include "text/byte_level_alphabet.h"
#include "text/regex.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::text::hf {
namespace {

// GPT-2's word pattern, which ByteLevel splits with when use_regex is set.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), words_(kGpt2Pattern, "ByteLevel word pattern") {}

  void pre_tokenize(std::vector<TextPiece>& pieces) const override {
    split_each(pieces, [&](const TextPiece& piece, std::vector<TextPiece>& out) {
      TextPiece spaced = piece;
      // Hugging Face adds the space to every piece that reaches this step, not only the first.
      if (add_prefix_space_ && spaced.text.rfind(' ', 0) != 0) {
        spaced.text.insert(0, " ");
        if (spaced.starts_input()) ++spaced.input_start_bytes;  // the space stands for the first character too
      }
      if (use_regex_) {
        split_piece(spaced, segments_of_matches(words_, spaced.text), SplitBehavior::Isolated, false, out);
      } else {
        out.push_back(std::move(spaced));
      }
    });
    for (TextPiece& piece : pieces) {
      if (piece.token) continue;
      piece.input_start_bytes = to_byte_level(std::string_view(piece.text).substr(0, piece.input_start_bytes)).size();
      piece.text = to_byte_level(piece.text);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
  Regex words_;
};

class Split : public PreTokenizer {
 public:
  Split(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void pre_tokenize(std::vector<TextPiece>& pieces) const override {
    split_each(pieces, [&](const TextPiece& piece, std::vector<TextPiece>& out) {
      split_piece(piece, segments_of_matches(pattern_, piece.text), behavior_, invert_, out);
    });
  }

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits around single characters of a class (Digits, Punctuation, WhitespaceSplit).
class CharacterSplit : public PreTokenizer {
 public:
  CharacterSplit(bool (*matches)(char32_t), SplitBehavior behavior) : matches_(matches), behavior_(behavior) {}

  void pre_tokenize(std::vector<TextPiece>& pieces) const override {
    split_each(pieces, [&](const TextPiece& piece, std::vector<TextPiece>& out) {
      split_piece(piece, segments_of_characters(piece.text, matches_), behavior_, false, out);
    });
  }

 private:
  bool (*matches_)(char32_t);
  SplitBehavior behavior_;
};

enum class PrependScheme { Always, First, Never };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {
    std::size_t i = 0;
    replacement_char_ = utf8::next(replacement_, i);
  }

  void pre_tokenize(std::vector<TextPiece>& pieces) const override {
    split_each(pieces, [&](const TextPiece& piece, std::vector<TextPiece>& out) {
      TextPiece replaced = piece;
      replaced.text = with_spaces_replaced(piece.text);
      replaced.input_start_bytes = with_spaces_replaced(piece.text.substr(0, piece.input_start_bytes)).size();
      const bool starts_with_replacement = replaced.text.rfind(replacement_, 0) == 0;
      if (!starts_with_replacement &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.starts_input()))) {
        replaced.text.insert(0, replacement_);
        // The prepended character stands for the piece's first character.
        if (replaced.starts_input()) replaced.input_start_bytes += replacement_.size();
      }
      if (!split_) {
        out.push_back(std::move(replaced));
        return;
      }
      const char32_t replacement_char = replacement_char_;
      split_piece(replaced,
                  segments_of_characters(replaced.text,
                                         [replacement_char](char32_t c) { return c == replacement_char; }),
                  SplitBehavior::MergedWithNext, false, out);
    });
  }

 private:
  std::string with_spaces_replaced(const std::string& text) const {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
      if (c == ' ') {
        out += replacement_;
      } else {
        out += c;
      }
    }
    return out;
  }

  std::string replacement_;
  char32_t replacement_char_;
  PrependScheme scheme_;
  bool split_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<TextPiece>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// Whitespace keeps the runs of word characters and the runs of other non-space characters.
constexpr const char* kWhitespacePattern = R"(\w+|[^\w\s]+)";

PrependScheme parse_prepend_scheme(const JsonNode& node) {
  // Older files spell the scheme as add_prefix_space (false meaning never).
  if (const auto legacy = node.find("add_prefix_space"); legacy && !legacy->as_bool()) return PrependScheme::Never;
  const auto scheme = node.find("prepend_scheme");
  if (!scheme) return PrependScheme::Always;
  const std::string name = scheme->as_string();
  if (name == "always") return PrependScheme::Always;
  if (name == "first") return PrependScheme::First;
  if (name == "never") return PrependScheme::Never;
  scheme->fail("unknown prepend scheme \"" + name + "\" (known: always, first, never)");
}

std::string parse_single_character(const JsonNode& node) {
  const std::string text = node.as_string();
  if (text.empty() || utf8::find_invalid(text) != std::string::npos ||
      utf8::sequence_length(static_cast<unsigned char>(text[0])) != text.size()) {
    node.fail("expected a single character, found \"" + text + "\"");
  }
  return text;
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonNode& node) {
  const std::string type = node.at("type").as_string();
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(node.bool_or("add_prefix_space", true), node.bool_or("use_regex", true));
  }
  if (type == "Split") {
    return std::make_unique<Split>(parse_pattern(node.at("pattern")), parse_split_behavior(node.at("behavior")),
                                   node.bool_or("invert", false));
  }
  if (type == "Digits") {
    return std::make_unique<CharacterSplit>(
        unicode::is_numeric,
        node.bool_or("individual_digits", false) ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation") {
    const auto behavior = node.find("behavior");
    return std::make_unique<CharacterSplit>(unicode::is_punctuation,
                                            behavior ? parse_split_behavior(*behavior) : SplitBehavior::Isolated);
  }
  if (type == "Whitespace") {
    return std::make_unique<Split>(Regex(kWhitespacePattern, node.where() + " (Whitespace)"), SplitBehavior::Removed,
                                   true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharacterSplit>(unicode::is_white_space, SplitBehavior::Removed);
  }
  if (type == "Metaspace") {
    return std::make_unique<Metaspace>(parse_single_character(node.at("replacement")), parse_prepend_scheme(node),
                                       node.bool_or("split", true));
  }
  if (type == "Sequence") {
    const JsonNode list = node.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < list.array_size(); ++i) steps.push_back(parse_pre_tokenizer(list.at(i)));
    return std::make_unique<Sequence>(std::move(steps));
  }
  node.at("type").fail("unsupported pre-tokenizer \"" + type +
                       "\" (supported: ByteLevel, Split, Digits, Punctuation, Whitespace, WhitespaceSplit, "
                       "Metaspace, Sequence)");
}

}  // namespace sjd::text::hf
