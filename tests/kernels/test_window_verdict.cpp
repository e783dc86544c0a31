// The host's side of the device verification's one read per step: a window's
// packed verdict unpacked by the layout the window walk kernel writes
// (kernels/kernels.h), and a batch's verdicts read in one copy. The kernels
// that fill the verdict are checked on the device machine by tests/cuda.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <vector>

#include "io/device_transfer.h"
#include "kernels/kernels.h"
#include "sampling/window_verdict.h"

using namespace sjd;

namespace {

// A verdict laid out field by field, as the walk kernel writes one.
at::Tensor packed_verdict(int chain, const std::vector<int64_t>& tokens, const std::vector<int64_t>& path,
                          bool rejected, int64_t siblings, const std::vector<int64_t>& next) {
  at::Tensor packed = at::full({kernels::walk_packed_size(chain)}, -7, at::kLong);
  int64_t* h = packed.data_ptr<int64_t>();
  h[0] = static_cast<int64_t>(tokens.size());
  h[1] = static_cast<int64_t>(path.size());
  h[2] = rejected ? 1 : 0;
  h[3] = siblings;
  h[4] = static_cast<int64_t>(next.size());
  std::copy(tokens.begin(), tokens.end(), h + kernels::walk_tokens_offset(chain));
  std::copy(path.begin(), path.end(), h + kernels::walk_path_offset(chain));
  std::copy(next.begin(), next.end(), h + kernels::walk_next_offset(chain));
  return packed;
}

}  // namespace

TEST_CASE("the packed verdict's layout is the one kernels.h documents", "[kernels]") {
  // Five counts, then room for chain + 1 tokens, chain path nodes and chain + 1 next drafts, written out here
  // rather than through the offset helpers that both the packing below and unpack_window use.
  for (const int chain : {1, 4, 64}) {
    INFO("chain " << chain);
    CHECK(kernels::walk_tokens_offset(chain) == 5);
    CHECK(kernels::walk_path_offset(chain) == 5 + chain + 1);
    CHECK(kernels::walk_next_offset(chain) == 5 + chain + 1 + chain);
    CHECK(kernels::walk_packed_size(chain) == 5 + chain + 1 + chain + chain + 1);
  }
  CHECK(kernels::walk_packed_size(4) == 19);
}

TEST_CASE("a packed window verdict unpacks field by field", "[kernels]") {
  const int chain = 4;
  // Two of four drafts accepted (nodes 0 and 5: a tree node), a residual token, next drafts for the rest.
  const at::Tensor packed = packed_verdict(chain, {11, 12, 13}, {0, 5}, true, 1, {21, 22, 23});
  const sampling::cuda::WindowResult got = sampling::cuda::unpack_window(packed, chain);
  CHECK(got.tokens == std::vector<int64_t>{11, 12, 13});
  CHECK(got.path == std::vector<int>{0, 5});
  CHECK(got.rejected);
  CHECK(got.sibling_accepts == 1);
  CHECK(got.next_drafts == std::vector<int64_t>{21, 22, 23});

  // The whole window accepted with its bonus token: every list at its largest.
  const sampling::cuda::WindowResult full =
      sampling::cuda::unpack_window(packed_verdict(chain, {1, 2, 3, 4, 5}, {0, 1, 2, 3}, false, 0, {6, 7, 8, 9, 10}), chain);
  CHECK(full.tokens.size() == 5);
  CHECK(full.path == std::vector<int>{0, 1, 2, 3});
  CHECK_FALSE(full.rejected);
  CHECK(full.next_drafts.back() == 10);
}

TEST_CASE("a verdict of the wrong size or with impossible counts is refused, never read past", "[kernels]") {
  const int chain = 3;
  const at::Tensor packed = packed_verdict(chain, {1}, {}, true, 0, {2, 3});
  CHECK_THROWS_WITH(sampling::cuda::unpack_window(packed, chain + 1), Catch::Contains("expected int64"));
  CHECK_THROWS_WITH(sampling::cuda::unpack_window(packed.to(at::kInt), chain), Catch::Contains("expected int64"));
  at::Tensor too_many = packed.clone();
  too_many[0] = chain + 2;  // tokens have room for chain + 1
  CHECK_THROWS_WITH(sampling::cuda::unpack_window(too_many, chain), Catch::Contains("token count 5"));
  at::Tensor negative = packed.clone();
  negative[4] = -1;
  CHECK_THROWS_WITH(sampling::cuda::unpack_window(negative, chain), Catch::Contains("next draft count -1"));
}

TEST_CASE("a batch's verdicts are read in one copy, each with its own shape and values", "[kernels]") {
  // An AR sequence's one-token verdict beside two windows' (different chains), as a batch step has.
  const std::vector<at::Tensor> parts = {at::tensor({int64_t{42}}), packed_verdict(2, {5, 6}, {0}, true, 0, {7, 8}),
                                         packed_verdict(5, {9}, {}, true, 0, {1, 2, 3, 4, 5})};
  const std::vector<at::Tensor> read = io::read_together(parts);
  REQUIRE(read.size() == parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    CHECK(read[i].sizes() == parts[i].sizes());
    CHECK(at::equal(read[i], parts[i]));
    CHECK(read[i].is_cpu());
  }
  CHECK(sampling::cuda::unpack_window(read[1], 2).tokens == std::vector<int64_t>{5, 6});
  CHECK(io::read_together({}).empty());
  CHECK_THROWS_WITH(io::read_together({at::tensor({int64_t{1}}), at::tensor({1.0f})}),
                    Catch::Contains("one dtype and one device"));
}
