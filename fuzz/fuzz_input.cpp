#include "fuzz_input.h"

#include <unistd.h>

#include <fstream>

namespace sjd::fuzz {

const std::filesystem::path& work_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    const auto path = base / ("sjd_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

std::filesystem::path write_input(const uint8_t* data, size_t size, const std::string& name) {
  const auto path = work_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace sjd::fuzz
