// `sjd --version`: what this binary is -- version, the commit it was built
// from, the LibTorch it links and whether it has CUDA -- for bug reports.
#include <ATen/Context.h>
#include <torch/version.h>

#include <sstream>

#include "cli_common.h"
#include "sjd_build_info.h"  // generated at build time (cmake/SjdBuildInfo.cmake)

namespace sjd::app {

std::string version_text() {
  std::ostringstream out;
  out << "sjd " << SJD_VERSION << " (commit " << SJD_GIT_COMMIT << ")\n"
      << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "." << TORCH_VERSION_PATCH << "\n";
#ifdef SJD_WITH_CUDA
  out << "CUDA: yes (" << (at::hasCUDA() ? std::to_string(at::getNumGPUs()) : std::string("0"))
      << " GPU(s) visible)";
#else
  out << "CUDA: no (a CPU-only build; docs/gpu.md builds one with CUDA)";
#endif
  return out.str();
}

}  // namespace sjd::app
