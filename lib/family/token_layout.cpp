#include "family/token_layout.h"

#include <algorithm>

#include <stdexcept>
#include <string>

namespace sjd::family {

void check_grid_side(int64_t side, const std::string& where) {
  if (side > kMaxGridSide) {
    throw std::invalid_argument(where + ": " + std::to_string(side) + " codes is past the " +
                                std::to_string(kMaxGridSide) + " an image side may have");
  }
}

void check_codes_in_vocabulary(int64_t first_code_id, int64_t codebook_size, int64_t vocab_size,
                               const std::string& where) {
  // Compared without adding, which could overflow for values read from a bundle.
  if (first_code_id < 0 || codebook_size < 1 || first_code_id >= vocab_size ||
      codebook_size > vocab_size - first_code_id) {
    throw std::invalid_argument(where + ".image_token_first and codebook_size: " + std::to_string(codebook_size) +
                                " image tokens from id " + std::to_string(first_code_id) +
                                " do not fit the vocabulary of " + std::to_string(vocab_size) +
                                " (transformer.vocab_size)");
  }
}

TokenLayout::TokenLayout(int64_t vocab_size, std::vector<int64_t> forced, int64_t grid_height, int64_t grid_width,
                         int64_t first_code_id, int64_t codebook_size)
    : vocab_size_(vocab_size),
      forced_(std::move(forced)),
      grid_height_(grid_height),
      grid_width_(grid_width),
      first_code_id_(first_code_id),
      codebook_size_(codebook_size) {
  check_codes_in_vocabulary(first_code_id, codebook_size, vocab_size, "layout");
  for (int64_t t = 0; t < length(); ++t) {
    if (forced_[static_cast<size_t>(t)] >= 0) {
      cell_.push_back(-1);
    } else {
      cell_.push_back(static_cast<int64_t>(index_of_cell_.size()));
      index_of_cell_.push_back(t);
    }
  }
  if (static_cast<int64_t>(index_of_cell_.size()) != grid_height * grid_width) {
    throw std::invalid_argument("layout: " + std::to_string(index_of_cell_.size()) + " image slots for a " +
                                std::to_string(grid_height) + "x" + std::to_string(grid_width) + " grid");
  }
  image_mask_ = at::zeros({vocab_size}, at::kBool);
  image_mask_.narrow(0, first_code_id, codebook_size).fill_(true);
}

int64_t TokenLayout::left_of(int64_t t) const {
  const int64_t c = cell(t);
  return (c < 0 || c % grid_width_ == 0) ? -1 : index_of_cell_[static_cast<size_t>(c - 1)];
}

int64_t TokenLayout::up_of(int64_t t) const {
  const int64_t c = cell(t);
  return (c < grid_width_) ? -1 : index_of_cell_[static_cast<size_t>(c - grid_width_)];
}

sampling::SlotConstraint TokenLayout::constraint(int64_t t) const {
  sampling::SlotConstraint c;
  c.forced = forced(t);
  if (c.forced < 0) c.allowed = image_mask_;
  return c;
}

std::vector<int64_t> TokenLayout::emittable() const {
  std::vector<int64_t> ids;
  for (int64_t c = 0; c < codebook_size_; ++c) ids.push_back(first_code_id_ + c);
  for (int64_t f : forced_) {
    if (f >= 0) ids.push_back(f);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

at::Tensor TokenLayout::codes(const std::vector<int64_t>& generated) const {
  if (static_cast<int64_t>(generated.size()) < length()) {
    throw std::invalid_argument("layout: sequence has " + std::to_string(generated.size()) + " tokens, expected " +
                                std::to_string(length()));
  }
  at::Tensor grid = at::empty({grid_height_, grid_width_}, at::kLong);
  auto g = grid.accessor<int64_t, 2>();
  for (size_t c = 0; c < index_of_cell_.size(); ++c) {
    const int64_t t = index_of_cell_[c];
    const int64_t code = generated[static_cast<size_t>(t)] - first_code_id_;
    if (code < 0 || code >= codebook_size_) {
      throw std::invalid_argument("layout: generated token " + std::to_string(t) + " (id " +
                                  std::to_string(generated[static_cast<size_t>(t)]) + ") is not an image token");
    }
    g[static_cast<int64_t>(c) / grid_width_][static_cast<int64_t>(c) % grid_width_] = code;
  }
  return grid;
}

}  // namespace sjd::family
