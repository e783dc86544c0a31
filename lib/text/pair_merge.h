#pragma once
// The byte-pair merge loop shared by the tiktoken and tokenizer.json engines:
// repeatedly merge the adjacent pair with the lowest rank, the leftmost one on
// ties, until no adjacent pair has a rank. A heap of candidate pairs keeps a
// long word at O(n log n); stale candidates are recognised by their spans.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace sjd::text {

// A run of the word's bytes [start, start + length) that is one token.
struct MergeSymbol {
  std::size_t start;
  std::size_t length;
  int64_t id;
};

struct PairMerge {
  int64_t rank;    // lower merges first
  int64_t merged;  // the id of the merged symbol
};

// `symbols` covers a word left to right; `rank_of(left, right)` returns the
// merge of two adjacent symbols, or nullopt when they do not merge.
// Returns the symbols left when no pair merges.
template <typename RankOf>
std::vector<MergeSymbol> merge_pairs(std::vector<MergeSymbol> symbols, const RankOf& rank_of) {
  struct Candidate {
    int64_t rank;
    std::size_t left;  // index of the left symbol
    std::size_t left_length, right_length;  // spans when queued, to detect stale entries
    int64_t merged;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  const std::size_t n = symbols.size();
  if (n < 2) return symbols;
  std::vector<std::size_t> next(n), previous(n);
  std::vector<bool> alive(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = i + 1;  // n marks "none"
    previous[i] = i == 0 ? n : i - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](std::size_t left) {
    const std::size_t right = next[left];
    if (right >= n) return;
    if (const std::optional<PairMerge> merge = rank_of(symbols[left], symbols[right])) {
      queue.push({merge->rank, left, symbols[left].length, symbols[right].length, merge->merged});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const std::size_t right = next[top.left];
    if (!alive[top.left] || right >= n || symbols[top.left].length != top.left_length ||
        symbols[right].length != top.right_length) {
      continue;  // one side has merged since this pair was queued
    }
    symbols[top.left].length += symbols[right].length;
    symbols[top.left].id = top.merged;
    alive[right] = false;
    next[top.left] = next[right];
    if (next[right] < n) previous[next[right]] = top.left;
    if (previous[top.left] < n) consider(previous[top.left]);
    consider(top.left);
  }
  std::vector<MergeSymbol> result;
  for (std::size_t i = 0; i < n; i = next[i]) result.push_back(symbols[i]);
  return result;
}

}  // namespace sjd::text
