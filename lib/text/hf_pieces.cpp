#include "text/hf_pieces.h"

#include <algorithm>

#include "text/utf8.h"

namespace sjd::text::hf {

SplitBehavior parse_split_behavior(const JsonNode& node) {
  const std::string name = node.as_string();
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  node.fail("unknown split behavior \"" + name +
            "\" (known: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

TextPiece sub_piece(const TextPiece& parent, std::size_t begin, std::size_t end, std::optional<int64_t> token) {
  const std::size_t start_bytes =
      begin < parent.input_start_bytes ? std::min(parent.input_start_bytes, end) - begin : 0;
  return {parent.text.substr(begin, end - begin), start_bytes, token};
}

Regex parse_pattern(const JsonNode& node) {
  node.expect_object();
  if (const auto literal = node.find("String")) return Regex::literal(literal->as_string(), literal->where());
  if (const auto regex = node.find("Regex")) return Regex(regex->as_string(), regex->where());
  node.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

std::vector<Segment> segments_of_matches(const Regex& pattern, const std::string& text) {
  std::vector<Segment> segments;
  std::size_t done = 0;
  for (const auto& [begin, end] : pattern.find_all(text)) {
    if (begin != done) segments.push_back({done, begin, false});
    segments.push_back({begin, end, true});
    done = end;
  }
  if (done != text.size()) segments.push_back({done, text.size(), false});
  return segments;
}

std::vector<Segment> segments_of_characters(const std::string& text, const std::function<bool(char32_t)>& matches) {
  std::vector<Segment> segments;
  std::size_t done = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t begin = i;
    if (!matches(utf8::next(text, i))) continue;
    if (begin != done) segments.push_back({done, begin, false});
    segments.push_back({begin, i, true});
    done = i;
  }
  if (done != text.size()) segments.push_back({done, text.size(), false});
  return segments;
}

namespace {

// Ranges to keep, as Hugging Face's NormalizedString::split computes them.
std::vector<Segment> apply_behavior(const std::vector<Segment>& segments, SplitBehavior behavior) {
  std::vector<Segment> kept;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      return segments;
    case SplitBehavior::Removed:
      for (const Segment& s : segments) {
        if (!s.is_match) kept.push_back(s);
      }
      return kept;
    case SplitBehavior::Contiguous:
      // Runs of segments with the same flag become one piece.
      for (const Segment& s : segments) {
        if (!kept.empty() && s.is_match == previous_match) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.is_match;
      }
      return kept;
    case SplitBehavior::MergedWithPrevious:
      // A match joins the piece before it (unless that piece is itself a match).
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.is_match;
      }
      return kept;
    case SplitBehavior::MergedWithNext:
      // A match joins the piece after it (unless that piece is itself a match).
      for (auto s = segments.rbegin(); s != segments.rend(); ++s) {
        if (s->is_match && !previous_match && !kept.empty()) {
          kept.back().begin = s->begin;
        } else {
          kept.push_back(*s);
        }
        previous_match = s->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      return kept;
  }
  return kept;
}

}  // namespace

void split_piece(const TextPiece& piece, std::vector<Segment> segments, SplitBehavior behavior, bool invert,
                 std::vector<TextPiece>& out) {
  if (invert) {
    for (Segment& s : segments) s.is_match = !s.is_match;
  }
  for (const Segment& s : apply_behavior(segments, behavior)) {
    if (s.end == s.begin) continue;
    out.push_back(sub_piece(piece, s.begin, s.end, std::nullopt));
  }
}

void split_each(std::vector<TextPiece>& pieces,
                const std::function<void(const TextPiece&, std::vector<TextPiece>&)>& split) {
  std::vector<TextPiece> result;
  result.reserve(pieces.size());
  for (TextPiece& piece : pieces) {
    if (piece.token) {
      result.push_back(std::move(piece));
      continue;
    }
    const std::size_t first_new = result.size();
    split(piece, result);
    result.erase(std::remove_if(result.begin() + static_cast<std::ptrdiff_t>(first_new), result.end(),
                                [](const TextPiece& p) { return !p.token && p.text.empty(); }),
                 result.end());
  }
  pieces = std::move(result);
}

}  // namespace sjd::text::hf
