// Reads safetensors files: validates the whole header before any tensor is
// made, so a malformed file fails with a message instead of reading out of bounds.
#include "io/safetensors.h"

#include "io/safetensors_dtype.h"
#include "io/weights.h"
#include "text/json_error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; sjd maps it as is");

namespace sjd::io {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw WeightError(file.string() + ": " + what);
}

[[noreturn]] void fail_tensor(const std::filesystem::path& file, const std::string& name, const std::string& what) {
  throw WeightError(file.string() + ": tensor '" + name + "': " + what);
}

// A whole file mapped private and writable: tensors made from it may be
// modified in place (copy-on-write) without touching the file. MAP_NORESERVE:
// only the pages written need memory of their own, so the kernel's heuristic
// overcommit check does not refuse a file larger than RAM + swap (a 7B model's
// f32 shards on a small machine) as if all of it were to be copied.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& file) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then refuses it).
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(file, std::string("cannot open: ") + std::strerror(errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      fail(file, "not a regular file");
    }
    size_ = static_cast<size_t>(info.st_size);
    if (size_ < 8) {
      ::close(fd);
      fail(file, "file is " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
    }
    void* mapped = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    const int map_errno = errno;
    ::close(fd);
    if (mapped == MAP_FAILED) fail(file, std::string("cannot map: ") + std::strerror(map_errno));
    data_ = static_cast<uint8_t*>(mapped);
  }
  ~MappedFile() { ::munmap(data_, size_); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes = 0;  // what shape and dtype need
};

uint64_t read_le64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::string join_shape(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

// A JSON value as a non-negative 64-bit integer; nullopt if it is anything else.
std::optional<uint64_t> as_count(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
  return std::nullopt;
}

// A JSON value for an error message. Nested values are only named: dumping
// them recurses, and a hostile header can nest deep enough to overflow the stack.
std::string describe(const json& value) {
  auto is_primitive = [](const json& item) { return item.is_primitive(); };
  const bool flat = value.is_primitive() || (value.is_array() && std::all_of(value.begin(), value.end(), is_primitive));
  return flat ? value.dump() : std::string("a nested ") + value.type_name();
}

const json& required_field(const std::filesystem::path& file, const std::string& name, const json& entry,
                           const char* key) {
  auto found = entry.find(key);
  if (found == entry.end()) fail_tensor(file, name, std::string("header entry has no '") + key + "'");
  return *found;
}

Entry parse_entry(const std::filesystem::path& file, const std::string& name, const json& value) {
  if (!value.is_object()) fail_tensor(file, name, "header entry is not an object");
  Entry entry;
  entry.name = name;

  const json& dtype = required_field(file, name, value, "dtype");
  if (!dtype.is_string()) fail_tensor(file, name, "'dtype' is not a string");
  auto type = scalar_type_of_safetensors_dtype(dtype.get<std::string>());
  if (!type) {
    fail_tensor(file, name, "unsupported dtype '" + dtype.get<std::string>() +
                                "' (supported: BF16, F16, F32, F64, I64, I32, I16, I8, U8, BOOL)");
  }
  entry.type = *type;

  const json& shape = required_field(file, name, value, "shape");
  if (!shape.is_array()) fail_tensor(file, name, "'shape' is not an array");
  for (const json& dim : shape) {
    auto size = as_count(dim);
    if (!size || *size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_tensor(file, name, "'shape' holds " + describe(dim) + ", not a non-negative integer");
    }
    entry.shape.push_back(static_cast<int64_t>(*size));
  }
  // ATen needs the byte size of the shape with zero dimensions skipped to fit
  // in int64 (for strides), even when the tensor is empty.
  uint64_t span = c10::elementSize(entry.type);
  for (int64_t size : entry.shape) {
    if (size == 0) continue;
    if (span > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(size)) {
      fail_tensor(file, name, "shape " + join_shape(entry.shape) + " is too large");
    }
    span *= static_cast<uint64_t>(size);
  }
  const bool empty = std::find(entry.shape.begin(), entry.shape.end(), 0) != entry.shape.end();
  entry.nbytes = empty ? 0 : span;

  const json& offsets = required_field(file, name, value, "data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0]) || !as_count(offsets[1])) {
    fail_tensor(file, name, "'data_offsets' is " + describe(offsets) + ", not [begin, end] with non-negative integers");
  }
  entry.begin = *as_count(offsets[0]);
  entry.end = *as_count(offsets[1]);
  if (entry.end < entry.begin) fail_tensor(file, name, "'data_offsets' " + describe(offsets) + " end before begin");
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::filesystem::path& file, const json& value) {
  if (!value.is_object()) fail(file, "'__metadata__' is not an object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) fail(file, "'__metadata__' entry '" + key + "' is not a string");
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Every tensor lies inside the data section, spans exactly its bytes, and no
// two tensors share a byte.
void check_layout(const std::filesystem::path& file, std::vector<Entry>& entries, uint64_t data_size) {
  for (const Entry& entry : entries) {
    const std::string range = "[" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
    if (entry.end > data_size) {
      fail_tensor(file, entry.name, "data_offsets " + range + " extend past the data section (" +
                                        std::to_string(data_size) + " bytes)");
    }
    if (entry.end - entry.begin != entry.nbytes) {
      fail_tensor(file, entry.name, "data_offsets " + range + " span " + std::to_string(entry.end - entry.begin) +
                                        " bytes but shape " + join_shape(entry.shape) + " of " +
                                        *safetensors_dtype_of(entry.type) + " needs " + std::to_string(entry.nbytes));
    }
  }
  // The non-empty tensors tile the data section, as the reference reader requires: bytes of no tensor
  // are what a second entry of one name (the JSON keeps the last) or an edited offset leaves behind.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const Entry* furthest = nullptr;  // the non-empty tensor reaching furthest so far
  for (const Entry& entry : entries) {
    if (entry.nbytes == 0) continue;
    if (furthest && entry.begin < furthest->end) {
      fail_tensor(file, entry.name, "data_offsets overlap those of tensor '" + furthest->name + "'");
    }
    const uint64_t covered = furthest ? furthest->end : 0;
    if (entry.begin > covered) {
      fail_tensor(file, entry.name, "data_offsets start at " + std::to_string(entry.begin) + ", leaving bytes [" +
                                        std::to_string(covered) + ", " + std::to_string(entry.begin) +
                                        ") of the data section to no tensor");
    }
    furthest = &entry;
  }
  const uint64_t covered = furthest ? furthest->end : 0;
  if (covered < data_size) {
    fail(file, "the last " + std::to_string(data_size - covered) + " bytes of the data section belong to no tensor");
  }
}

// ATen assumes bool bytes are 0 or 1; anything else would make results undefined.
void check_bool_bytes(const std::filesystem::path& file, const Entry& entry, const uint8_t* bytes) {
  for (uint64_t i = 0; i < entry.nbytes; ++i) {
    if (bytes[i] > 1) {
      fail_tensor(file, entry.name, "BOOL element " + std::to_string(i) + " holds byte value " +
                                        std::to_string(bytes[i]) + ", not 0 or 1");
    }
  }
}

at::Tensor make_tensor(const std::shared_ptr<MappedFile>& mapping, uint8_t* bytes, const Entry& entry) {
  const auto options = at::TensorOptions().dtype(entry.type).device(at::kCPU);
  const auto misalignment = reinterpret_cast<uintptr_t>(bytes) % c10::elementSize(entry.type);
  if (entry.nbytes == 0 || misalignment != 0) {
    // Misaligned elements (a header length or offset that is not a multiple of
    // the item size) are copied: ATen kernels expect aligned data.
    at::Tensor copy = at::empty(entry.shape, options);
    if (entry.nbytes) std::memcpy(copy.data_ptr(), bytes, entry.nbytes);
    return copy;
  }
  return at::from_blob(bytes, entry.shape, [mapping](void*) {}, options);
}

}  // namespace

SafetensorsFile read_safetensors(const std::filesystem::path& file) {
  auto mapping = std::make_shared<MappedFile>(file);
  const uint64_t header_size = read_le64(mapping->data());
  if (header_size > mapping->size() - 8) {
    fail(file, "header length " + std::to_string(header_size) + " exceeds the " +
                   std::to_string(mapping->size() - 8) + " bytes after the length field");
  }
  const char* header_begin = reinterpret_cast<const char*>(mapping->data() + 8);
  json header;
  std::string repeated;  // a tensor named twice: the JSON would keep the last entry silently
  std::set<std::string> names;
  const json::parser_callback_t no_repeated_names = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second &&
        repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    header = json::parse(header_begin, header_begin + header_size, no_repeated_names);
  } catch (const json::exception& error) {
    fail(file, "header is not valid JSON: " + text::json_error_message(error));
  }
  if (!repeated.empty()) fail_tensor(file, repeated, "is named twice in the header");
  if (!header.is_object()) fail(file, "header is not a JSON object");

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      result.metadata = parse_metadata(file, value);
    } else {
      entries.push_back(parse_entry(file, name, value));
    }
  }
  check_layout(file, entries, mapping->size() - 8 - header_size);

  uint8_t* data = mapping->data() + 8 + header_size;
  for (const Entry& entry : entries) {
    if (entry.type == at::kBool) check_bool_bytes(file, entry, data + entry.begin);
  }
  for (const Entry& entry : entries) {
    result.tensors.emplace(entry.name, make_tensor(mapping, data + entry.begin, entry));
  }
  return result;
}

}  // namespace sjd::io
