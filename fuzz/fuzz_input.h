#pragma once
// The readers under test take paths, so each fuzz input is written to a file
// (under /dev/shm when there is one, so no disk is involved).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace sjd::fuzz {

// A folder of this process's own, created on first use.
const std::filesystem::path& work_dir();

// Writes `size` bytes to work_dir() / name and returns the path.
std::filesystem::path write_input(const uint8_t* data, size_t size, const std::string& name);

}  // namespace sjd::fuzz
