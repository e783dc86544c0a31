#pragma once
// The shape of what a family generates: which generated indices are forced
// structure tokens (begin/end of image, size tokens, row ends), which are image
// codes and where they sit on the grid. The logits pipeline's constraints, the
// spatial draft initialisations and code extraction all read it.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "sampling/logits_pipeline.h"

namespace sjd::family {

// The most codes an image's side may have: 16384 px (--resolution's limit) in 8-px cells. A bundle's
// grid past it is refused before the layout's tables are made (a grid side of 2^62 multiplied past
// int64 and was allocated until the machine ran out).
constexpr int64_t kMaxGridSide = 2048;
// Throws std::invalid_argument naming `where` (a bundle key) when side is past kMaxGridSide.
void check_grid_side(int64_t side, const std::string& where);
// Throws std::invalid_argument naming `where` (the layout's section) when the image tokens
// first_code_id .. first_code_id + codebook_size - 1 do not lie within the vocabulary.
void check_codes_in_vocabulary(int64_t first_code_id, int64_t codebook_size, int64_t vocab_size,
                               const std::string& where);

class TokenLayout {
 public:
  // forced[t]: the forced token of generated index t, or -1 for an image code;
  // image codes fill the grid row-major in order of t.
  TokenLayout(int64_t vocab_size, std::vector<int64_t> forced, int64_t grid_height, int64_t grid_width,
              int64_t first_code_id, int64_t codebook_size);

  int64_t length() const { return static_cast<int64_t>(forced_.size()); }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t grid_height() const { return grid_height_; }
  int64_t grid_width() const { return grid_width_; }
  int64_t first_code_id() const { return first_code_id_; }
  int64_t codebook_size() const { return codebook_size_; }

  int64_t forced(int64_t t) const { return forced_[static_cast<size_t>(t)]; }
  // Grid cell (row * width + col) of index t, or -1 for a structure token.
  int64_t cell(int64_t t) const { return cell_[static_cast<size_t>(t)]; }
  // Generated index of the grid neighbour to the left / above, or -1.
  int64_t left_of(int64_t t) const;
  int64_t up_of(int64_t t) const;

  // bool [V]. Never changed after construction: a GPU keeps one device copy of it per process
  // (sampling::cuda::upload_constraints).
  const at::Tensor& image_mask() const { return image_mask_; }
  sampling::SlotConstraint constraint(int64_t t) const;
  // Every token id a generated slot may hold: the image codes and the forced
  // structure tokens, ascending (the rows a restricted output head computes).
  std::vector<int64_t> emittable() const;

  // Codebook indices [grid_height, grid_width] from a complete generated sequence;
  // throws naming the index if a grid slot holds a non-image token.
  at::Tensor codes(const std::vector<int64_t>& generated) const;

 private:
  int64_t vocab_size_;
  std::vector<int64_t> forced_;
  std::vector<int64_t> cell_;
  std::vector<int64_t> index_of_cell_;
  int64_t grid_height_, grid_width_, first_code_id_, codebook_size_;
  at::Tensor image_mask_;
};

}  // namespace sjd::family
