#pragma once
// Moving a step's data to and waiting for a device, shared by every area.
//
// Small host inputs of a GPU step (tokens, positions, the attention bias, cache
// indices, the verifier's draft tokens and tables) sent without making the host
// wait. A plain .to(device) of pageable memory synchronises with the stream: a
// step with twenty such uploads would let the GPU run dry twenty times. The
// values are staged in page-locked memory -- Torch's caching host allocator keeps
// that block until the copy has run -- and copied asynchronously on the current
// stream, in order with the kernels that read them. Header-only, so that every
// area (model, sampling, decoding, engine) can use it.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <stdexcept>
#include <vector>

namespace sjd::io {

// `host` (a CPU tensor) on `device`: itself for the CPU.
inline at::Tensor upload(const at::Tensor& host, at::Device device) {
  if (device.is_cpu()) return host;
  at::Tensor staged = at::empty(host.sizes(), host.options().pinned_memory(true));
  staged.copy_(host);
  return staged.to(device, /*non_blocking=*/true);
}

// Small tensors of one dtype on one device (a step's verdicts, one per sequence of the batch) read
// to the host in one copy: one wait for the device, not one per tensor. Each comes back with its
// own shape, a view of the one host tensor.
inline std::vector<at::Tensor> read_together(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> out;
  if (parts.empty()) return out;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& part : parts) {
    if (part.scalar_type() != parts.front().scalar_type() || part.device() != parts.front().device()) {
      throw std::invalid_argument("read_together: the tensors must share one dtype and one device");
    }
    flat.push_back(part.reshape({-1}));
  }
  const at::Tensor host = at::cat(flat).to(at::kCPU);
  int64_t offset = 0;
  for (const at::Tensor& part : parts) {
    out.push_back(host.narrow(0, offset, part.numel()).view(part.sizes()));
    offset += part.numel();
  }
  return out;
}

// Blocks until the device has finished the work queued so far (no-op on the CPU).
inline void synchronize(at::Device device) {
  if (device.is_cpu()) return;
  c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
}

}  // namespace sjd::io
