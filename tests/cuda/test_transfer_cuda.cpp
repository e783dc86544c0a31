// Uploads queued behind work the device has not reached yet. io::upload and
// StepUpload stage each upload in page-locked memory and copy it asynchronously;
// the staging block must keep its contents until the copy has run, although the
// host has long gone on to stage the next upload. The other tests wait for the
// device after every step, so a staging buffer reused too early would pass them:
// here a kernel that sleeps holds the stream while sixteen uploads are staged.
#include <catch2/catch.hpp>

#include <ATen/cuda/Sleep.h>

#include <vector>

#include "device_cases.h"
#include "io/device_transfer.h"
#include "io/step_upload.h"

using namespace sjd;

TEST_CASE("uploads staged while the stream is busy arrive with their own contents", "[cuda][upload]") {
  const at::Device device = cuda_testing::device();
  at::cuda::sleep(int64_t{1} << 28);  // a fraction of a second on the stream
  std::vector<at::Tensor> plain;
  std::vector<io::StepUpload> steps(16);
  for (int64_t k = 0; k < 16; ++k) {
    plain.push_back(io::upload(at::full({4096}, k, at::kLong), device));
    steps[static_cast<size_t>(k)].add(std::vector<int32_t>(1000, static_cast<int32_t>(100 + k)));
    steps[static_cast<size_t>(k)].add(std::vector<double>(3, 0.5 * static_cast<double>(k)));
    steps[static_cast<size_t>(k)].send(device);
  }
  for (int64_t k = 0; k < 16; ++k) {
    CHECK(at::equal(plain[static_cast<size_t>(k)].cpu(), at::full({4096}, k, at::kLong)));
    const io::StepUpload& step = steps[static_cast<size_t>(k)];
    CHECK(at::equal(step.tensor(0, at::kInt).cpu(), at::full({1000}, 100 + k, at::kInt)));
    CHECK(at::equal(step.tensor(1, at::kDouble).cpu(), at::full({3}, 0.5 * static_cast<double>(k), at::kDouble)));
  }
}
