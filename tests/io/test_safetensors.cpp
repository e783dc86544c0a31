// safetensors reading and writing: round trips for every dtype, files built
// byte by byte by the test, and every kind of malformed file.
#include "io/safetensors.h"
#include "io/weights.h"
#include "testing/test_support.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;

namespace {

// A safetensors file from its parts: little-endian length, header, data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return bytes + header + data;
}

// The message of the WeightError that reading `bytes` as a file throws.
std::string read_error(const TempDir& dir, const std::string& bytes) {
  const auto file = dir / "bad.safetensors";
  sjd::testing::write_file(file, bytes);
  try {
    io::read_safetensors(file);
  } catch (const io::WeightError& error) {
    return error.what();
  }
  FAIL("reading the malformed file did not throw WeightError");
  return "";
}

template <typename T>
std::string raw_bytes(std::initializer_list<T> values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

}  // namespace

TEST_CASE("safetensors round trip keeps every dtype, shape and value", "[io][safetensors]") {
  const auto dtype = GENERATE(at::kBFloat16, at::kHalf, at::kFloat, at::kDouble, at::kLong, at::kInt, at::kShort,
                              at::kChar, at::kByte, at::kBool);
  TempDir dir("safetensors_roundtrip");
  // Values that every dtype holds exactly (bool: alternating 0/1).
  at::Tensor values = at::arange(12, at::kDouble).reshape({3, 4});
  values = dtype == at::kBool ? values.remainder(2) : (at::isFloatingType(dtype) ? values * 0.5 - 2 : values);
  const std::map<std::string, at::Tensor> tensors{
      {"values", values.to(dtype)},
      {"scalar", at::scalar_tensor(1, at::TensorOptions().dtype(dtype))},
      {"empty", at::empty({0, 5}, at::TensorOptions().dtype(dtype))},
      {"strided", values.to(dtype).t()},  // not contiguous: written in logical order
  };
  io::write_safetensors(dir / "all.safetensors", tensors, {{"format", "pt"}, {"note", "ünïcode"}});
  const std::string written = sjd::testing::read_file(dir / "all.safetensors");
  CHECK(static_cast<uint8_t>(written[0]) % 8 == 0);  // header padded: tensor data starts 8-byte aligned

  const io::SafetensorsFile loaded = io::read_safetensors(dir / "all.safetensors");
  REQUIRE(loaded.tensors.size() == tensors.size());
  for (const auto& [name, expected] : tensors) {
    INFO("tensor " << name << " dtype " << dtype);
    const at::Tensor& found = loaded.tensors.at(name);
    CHECK(found.scalar_type() == dtype);
    CHECK(found.device().is_cpu());
    CHECK(found.sizes() == expected.sizes());
    CHECK(at::equal(found, expected));
  }
  CHECK(loaded.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"note", "ünïcode"}});
}

TEST_CASE("safetensors reads a file laid out by hand, aligned or not", "[io][safetensors]") {
  TempDir dir("safetensors_manual");
  // 'bytes' is 3 bytes long, so 'floats' starts at an odd offset and must be copied.
  const std::string header = R"({"bytes":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                             R"("floats":{"dtype":"F32","shape":[2],"data_offsets":[3,11]},)"
                             R"("__metadata__":{"k":"v"}})";
  const std::string data = raw_bytes<uint8_t>({7, 8, 9}) + raw_bytes<float>({1.5f, -2.25f});
  sjd::testing::write_file(dir / "manual.safetensors", safetensors_bytes(header, data));

  auto loaded = io::read_safetensors(dir / "manual.safetensors");
  CHECK(at::equal(loaded.tensors.at("bytes"), at::tensor({7, 8, 9}, at::kByte)));
  CHECK(at::equal(loaded.tensors.at("floats"), at::tensor({1.5f, -2.25f})));
  CHECK(loaded.metadata.at("k") == "v");
  // Loaded tensors are private copies of the file's bytes: writing them leaves the file alone.
  loaded.tensors.at("bytes").fill_(0);
  CHECK(at::equal(io::read_safetensors(dir / "manual.safetensors").tensors.at("bytes"),
                  at::tensor({7, 8, 9}, at::kByte)));
}

TEST_CASE("tensors outlive the WeightMap and file they came from", "[io][safetensors]") {
  TempDir dir("safetensors_lifetime");
  io::write_safetensors(dir / "w.safetensors", {{"w", at::arange(1000, at::kFloat)}});
  at::Tensor kept = io::WeightMap::load(dir / "w.safetensors").get("w");
  std::filesystem::remove(dir / "w.safetensors");
  CHECK(kept.sum().item<double>() == 999.0 * 1000 / 2);
}

TEST_CASE("malformed safetensors files give WeightError naming file and tensor", "[io][safetensors]") {
  TempDir dir("safetensors_malformed");
  const std::string path = (dir / "bad.safetensors").string();
  const std::string f32_pair = raw_bytes<float>({1, 2});

  SECTION("shorter than the length field") {
    const std::string message = read_error(dir, "abc");
    CHECK_THAT(message, Contains(path) && Contains("shorter than the 8-byte header length"));
  }
  SECTION("header length larger than the file") {
    std::string bytes = safetensors_bytes("{}", "");
    bytes[0] = 100;
    CHECK_THAT(read_error(dir, bytes), Contains(path) && Contains("header length 100 exceeds"));
  }
  SECTION("header length near 2^64") {
    CHECK_THAT(read_error(dir, std::string(8, '\xff') + "{}"), Contains(path) && Contains("exceeds"));
  }
  SECTION("header that is not JSON") {
    CHECK_THAT(read_error(dir, safetensors_bytes("{\"a\": [1,", "")), Contains(path) && Contains("not valid JSON"));
  }
  SECTION("header that is not an object") {
    CHECK_THAT(read_error(dir, safetensors_bytes("[1, 2]", "")), Contains(path) && Contains("not a JSON object"));
  }
  SECTION("entry without dtype, shape or data_offsets") {
    const auto [missing, header] = GENERATE(table<std::string, std::string>({
        {"dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})"},
        {"shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})"},
        {"data_offsets", R"({"w":{"dtype":"F32","shape":[2]}})"},
    }));
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains(path) && Contains("tensor 'w'") && Contains("no '" + missing + "'"));
  }
  SECTION("entry that is not an object") {
    CHECK_THAT(read_error(dir, safetensors_bytes(R"({"w": 5})", "")),
               Contains("tensor 'w'") && Contains("not an object"));
  }
  SECTION("unknown dtype") {
    const std::string header = R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, "ab")),
               Contains(path) && Contains("tensor 'w'") && Contains("unsupported dtype 'F8_E4M3'"));
  }
  SECTION("negative or fractional shape") {
    const std::string shape = GENERATE(std::string("[-2]"), std::string("[2.5]"), std::string("[\"2\"]"));
    const std::string header = R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains("tensor 'w'") && Contains("not a non-negative integer"));
  }
  SECTION("shape whose byte size overflows, even if empty") {
    const std::string shape =
        GENERATE(std::string("[4294967296,4294967296]"), std::string("[4294967296,4294967296,0]"));
    const std::string header = R"({"w":{"dtype":"F64","shape":)" + shape + R"(,"data_offsets":[0,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)), Contains("tensor 'w'") && Contains("too large"));
  }
  SECTION("data_offsets malformed") {
    const std::string offsets = GENERATE(std::string("[0]"), std::string("[0,8,9]"), std::string("[-1,7]"),
                                         std::string("\"0-8\""));
    const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}}";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains("tensor 'w'") && Contains("not [begin, end]"));
  }
  SECTION("data_offsets end before begin") {
    const std::string header = R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains("tensor 'w'") && Contains("end before begin"));
  }
  SECTION("data_offsets past the data section") {
    const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains(path) && Contains("tensor 'w'") && Contains("extend past the data section (8 bytes)"));
  }
  SECTION("data_offsets span not matching shape and dtype") {
    const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains("tensor 'w'") && Contains("span 8 bytes") && Contains("needs 12"));
  }
  SECTION("overlapping tensors") {
    const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains(path) && Contains("tensor 'b'") && Contains("overlap") && Contains("'a'"));
  }
  SECTION("a tensor named twice") {  // the JSON would keep the second entry and leave the first one's bytes unread
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains(path) && Contains("tensor 'w'") && Contains("named twice"));
  }
  SECTION("bytes of the data section that belong to no tensor") {
    const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(gap, f32_pair)),
               Contains(path) && Contains("tensor 'a'") && Contains("leaving bytes [0, 4)"));
    const std::string trailing = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(trailing, f32_pair)),
               Contains(path) && Contains("the last 4 bytes of the data section belong to no tensor"));
  }
  SECTION("deeply nested header values") {
    const std::string nested = std::string(100000, '[') + std::string(100000, ']');
    const std::string header = R"({"w":{"dtype":"F32","shape":)" + nested + R"(,"data_offsets":[0,8]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, f32_pair)),
               Contains("tensor 'w'") && Contains("'shape' holds a nested array"));
  }
  SECTION("metadata that is not strings") {
    CHECK_THAT(read_error(dir, safetensors_bytes(R"({"__metadata__":{"n":1}})", "")),
               Contains(path) && Contains("'__metadata__' entry 'n'"));
  }
  SECTION("bool bytes other than 0 and 1") {
    const std::string header = R"({"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
    CHECK_THAT(read_error(dir, safetensors_bytes(header, std::string("\x01\x00\x02", 3))),
               Contains("tensor 'mask'") && Contains("byte value 2"));
  }
}

TEST_CASE("empty tensors may share an offset with others", "[io][safetensors]") {
  TempDir dir("safetensors_empty");
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                             R"("wide_but_empty":{"dtype":"F64","shape":[1048576,0,1024],"data_offsets":[8,8]}})";
  sjd::testing::write_file(dir / "e.safetensors", safetensors_bytes(header, raw_bytes<float>({1, 2})));
  const auto loaded = io::read_safetensors(dir / "e.safetensors");
  CHECK(loaded.tensors.at("e").numel() == 0);
  CHECK(loaded.tensors.at("wide_but_empty").sizes() == at::IntArrayRef({1048576, 0, 1024}));
  CHECK(at::equal(loaded.tensors.at("a"), at::tensor({1.0f, 2.0f})));
}

TEST_CASE("missing files and unwritable dtypes are reported", "[io][safetensors]") {
  TempDir dir("safetensors_missing");
  CHECK_THROWS_WITH(io::read_safetensors(dir / "absent.safetensors"),
                    Contains("absent.safetensors") && Contains("cannot open"));
  CHECK_THROWS_WITH(io::read_safetensors(dir.path()), Contains("not a regular file"));
  CHECK_THROWS_WITH(io::write_safetensors(dir / "c.safetensors", {{"z", at::zeros({2}, at::kComplexFloat)}}),
                    Contains("c.safetensors") && Contains("tensor 'z'"));
  CHECK_FALSE(std::filesystem::exists(dir / "c.safetensors"));
}

TEST_CASE("truncated and corrupted files never crash, only throw WeightError", "[io][safetensors]") {
  TempDir dir("safetensors_fuzz");
  const auto good_file = dir / "good.safetensors";
  io::write_safetensors(good_file, {{"a", at::arange(6, at::kFloat)}, {"b", at::ones({2, 2}, at::kBool)}},
                        {{"k", "v"}});
  const std::string good = sjd::testing::read_file(good_file);
  const auto file = dir / "mutated.safetensors";
  auto read_or_weight_error = [&](const std::string& bytes) {
    sjd::testing::write_file(file, bytes);
    try {
      io::read_safetensors(file);
    } catch (const io::WeightError& error) {
      CHECK_THAT(error.what(), Contains(file.string()));
    }
  };
  // Every strict prefix lacks a byte the header promised: refused, never read as a shorter tensor.
  for (size_t length = 0; length < good.size(); ++length) {
    INFO("first " << length << " bytes");
    sjd::testing::write_file(file, good.substr(0, length));
    CHECK_THROWS_AS(io::read_safetensors(file), io::WeightError);
  }
  for (size_t at = 0; at < good.size(); ++at) {
    for (char replacement : {'\0', '\x01', '"', '9', '}', '\xff'}) {
      std::string bytes = good;
      bytes[at] = replacement;
      read_or_weight_error(bytes);
    }
  }
}

TEST_CASE("a file larger than the machine's memory is mapped, not refused", "[io][safetensors]") {
  // Under the kernel's heuristic overcommit (mode 0) a private writable mapping larger than RAM + swap
  // is refused unless it asks for no reservation (MAP_NORESERVE); other modes say nothing about that.
  std::ifstream mode_file("/proc/sys/vm/overcommit_memory");
  int mode = -1;
  mode_file >> mode;
  if (mode != 0) {
    SJD_SKIP_TEST("vm.overcommit_memory is " << mode << ", not 0: nothing to check here");
  }
  std::ifstream meminfo("/proc/meminfo");
  uint64_t memory_kb = 0;
  for (std::string key; meminfo >> key;) {
    uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemTotal:" || key == "SwapTotal:") memory_kb += kb;
    meminfo.ignore(64, '\n');
  }
  REQUIRE(memory_kb > 0);
  const uint64_t data_bytes = memory_kb * 1024 + (8ull << 30);
  TempDir dir("safetensors_huge");
  const auto file = dir / "huge.safetensors";
  const std::string header = R"({"all":{"dtype":"U8","shape":[)" + std::to_string(data_bytes) +
                             R"(],"data_offsets":[0,)" + std::to_string(data_bytes) + "]}}";
  sjd::testing::write_file(file, safetensors_bytes(header, ""));
  std::filesystem::resize_file(file, 8 + header.size() + data_bytes);  // sparse: no disk is used
  const auto loaded = io::read_safetensors(file);
  CHECK(static_cast<uint64_t>(loaded.tensors.at("all").numel()) == data_bytes);
  CHECK(loaded.tensors.at("all")[12345].item<uint8_t>() == 0);
}
