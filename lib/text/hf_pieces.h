#pragma once
// The pieces a tokenizer.json pipeline cuts its input into, and the ways a
// piece is split around the matches of a pattern (Hugging Face's
// SplitDelimiterBehavior), shared by the added-token, Split, Digits,
// Punctuation, Whitespace, Metaspace and ByteLevel steps.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "text/json_node.h"
#include "text/regex.h"

namespace sjd::text::hf {

struct TextPiece {
  std::string text;
  // How many leading bytes of `text` stand for the input's first character
  // (0 when the piece does not start the input). Hugging Face keeps an
  // alignment to the input for every character; Metaspace's "first" scheme
  // asks whether a piece starts at input offset 0, which holds for a piece cut
  // anywhere inside what the first character became (İ lower-cases to two
  // characters). sjd tracks only this span, from the first code point
  // normalised on its own; it misses the case where normalisation composes
  // that code point with the combining marks after it and a later step cuts
  // the result apart (Hugging Face would then count both parts as first).
  std::size_t input_start_bytes = 0;
  // Set when the piece is an added token: later steps leave it alone.
  std::optional<int64_t> token;

  bool starts_input() const { return input_start_bytes > 0; }
};

// The piece text[begin, end) of `parent`.
TextPiece sub_piece(const TextPiece& parent, std::size_t begin, std::size_t end, std::optional<int64_t> token);

// A stretch of a piece's text and whether the pattern matched it.
struct Segment {
  std::size_t begin, end;
  bool is_match;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

SplitBehavior parse_split_behavior(const JsonNode& node);

// The regex of a {"String": literal} or {"Regex": pattern} object (Split and Replace patterns).
Regex parse_pattern(const JsonNode& node);

// Segments covering `text`: the matches of `pattern` and the stretches between them.
std::vector<Segment> segments_of_matches(const Regex& pattern, const std::string& text);
// Segments covering `text`: each character for which `matches` holds, and the stretches between.
std::vector<Segment> segments_of_characters(const std::string& text, const std::function<bool(char32_t)>& matches);

// Appends to `out` the non-empty pieces of `piece` that `behavior` keeps; `invert` swaps matches and non-matches first.
void split_piece(const TextPiece& piece, std::vector<Segment> segments, SplitBehavior behavior, bool invert,
                 std::vector<TextPiece>& out);

// Replaces every piece that is not an added token by the pieces `split` makes of it.
void split_each(std::vector<TextPiece>& pieces,
                const std::function<void(const TextPiece&, std::vector<TextPiece>&)>& split);

}  // namespace sjd::text::hf
