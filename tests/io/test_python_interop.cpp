// Files written by PyTorch and HF's safetensors library, read by sjd, and the
// reverse. Python (the one the build was configured with) writes its fixtures
// here at test time; without it and the packages the tests say so and skip.
#include "io/safetensors.h"
#include "io/weights.h"
#include "testing/test_support.h"

#include <catch2/catch.hpp>

#include <cstdlib>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;

namespace {

bool python_has(const std::string& modules) {
  const std::string command = "'" + sjd::testing::python_program() + "' -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// Runs `script` with `arguments`; returns its output when it fails, "" when it succeeds.
std::string python_failure(const TempDir& dir, const std::string& script, const std::string& arguments) {
  sjd::testing::write_file(dir / "script.py", script);
  const std::string command = "'" + sjd::testing::python_program() + "' '" + (dir / "script.py").string() + "' " +
                              arguments + " > '" + (dir / "script.log").string() + "' 2>&1";
  if (std::system(command.c_str()) == 0) return "";
  return "python failed:\n" + sjd::testing::read_file(dir / "script.log");
}

// The same tensors on both sides: arange values every dtype holds exactly.
const char* kPythonExpected = R"(
import sys, torch
DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
def expected():
    tensors = {}
    for name, dtype in DTYPES.items():
        values = torch.arange(12, dtype=torch.float64).reshape(3, 4)
        if dtype == torch.bool:
            values = values.remainder(2)
        elif dtype.is_floating_point:
            values = values * 0.5 - 2
        tensors["t_" + name] = values.to(dtype)
    return tensors
)";

std::map<std::string, at::Tensor> cpp_expected() {
  const std::vector<std::pair<std::string, at::ScalarType>> dtypes{
      {"BF16", at::kBFloat16}, {"F16", at::kHalf}, {"F32", at::kFloat}, {"F64", at::kDouble}, {"I64", at::kLong},
      {"I32", at::kInt},       {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},    {"BOOL", at::kBool}};
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, dtype] : dtypes) {
    at::Tensor values = at::arange(12, at::kDouble).reshape({3, 4});
    if (dtype == at::kBool) {
      values = values.remainder(2);
    } else if (at::isFloatingType(dtype)) {
      values = values * 0.5 - 2;
    }
    tensors["t_" + name] = values.to(dtype);
  }
  return tensors;
}

}  // namespace

TEST_CASE("safetensors written by HF's library are read exactly", "[io][safetensors][python]") {
  if (!python_has("torch, safetensors")) {
    SJD_SKIP_TEST("python3 with torch and safetensors is not available: interoperability not tested");
  }
  TempDir dir("interop_from_python");
  const std::string script = std::string(kPythonExpected) + R"(
from safetensors.torch import save_file
save_file(expected(), sys.argv[1], metadata={"origin": "python"})
)";
  const auto file = dir / "python.safetensors";
  const std::string failure = python_failure(dir, script, "'" + file.string() + "'");
  INFO(failure);
  REQUIRE(failure.empty());

  const io::SafetensorsFile loaded = io::read_safetensors(file);
  const auto expected = cpp_expected();
  REQUIRE(loaded.tensors.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    INFO(name);
    CHECK(loaded.tensors.at(name).scalar_type() == tensor.scalar_type());
    CHECK(at::equal(loaded.tensors.at(name), tensor));
  }
  CHECK(loaded.metadata.at("origin") == "python");
}

TEST_CASE("safetensors written by sjd are read exactly by HF's library", "[io][safetensors][python]") {
  if (!python_has("torch, safetensors")) {
    SJD_SKIP_TEST("python3 with torch and safetensors is not available: interoperability not tested");
  }
  TempDir dir("interop_to_python");
  const auto file = dir / "sjd.safetensors";
  io::write_safetensors(file, cpp_expected(), {{"origin", "sjd"}});
  const std::string script = std::string(kPythonExpected) + R"(
from safetensors import safe_open
from safetensors.torch import load_file
loaded = load_file(sys.argv[1])
for name, tensor in expected().items():
    assert loaded[name].dtype == tensor.dtype, (name, loaded[name].dtype)
    assert torch.equal(loaded[name], tensor), name
assert sorted(loaded) == sorted(expected()), sorted(loaded)
with safe_open(sys.argv[1], framework="pt") as f:
    assert f.metadata() == {"origin": "sjd"}, f.metadata()
)";
  const std::string failure = python_failure(dir, script, "'" + file.string() + "'");
  INFO(failure);
  CHECK(failure.empty());
}

TEST_CASE("TorchScript archives give parameters, buffers and tensor attributes", "[io][torchscript][python]") {
  if (!python_has("torch")) {
    SJD_SKIP_TEST("python3 with torch is not available: TorchScript loading not tested");
  }
  TempDir dir("torchscript");
  const std::string script = R"(
import sys, torch
class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.arange(6.0).reshape(3, 2, 1, 1) * 0.25)
            self.conv.bias.copy_(torch.tensor([1.0, 2.0, 3.0]))
        self.register_buffer("running", torch.arange(3, dtype=torch.float64))
        self.table = torch.arange(6).reshape(2, 3)  # a plain tensor attribute
    def forward(self, x):
        return self.conv(x)
class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.scale = torch.nn.Parameter(torch.full((4,), 0.5, dtype=torch.bfloat16))
        self.steps = 3  # not a tensor: not a weight
    def forward(self, x):
        return self.inner(x)
for path in sys.argv[1:]:
    torch.jit.save(torch.jit.script(Outer()), path)
)";
  const auto pt_file = dir / "model.pt";
  const std::string failure =
      python_failure(dir, script, "'" + pt_file.string() + "' '" + (dir / "model.ts").string() + "'");
  INFO(failure);
  REQUIRE(failure.empty());

  const io::WeightMap weights = io::WeightMap::load(pt_file);
  CHECK(weights.names() ==
        std::vector<std::string>{"inner.conv.bias", "inner.conv.weight", "inner.running", "inner.table", "scale"});
  CHECK(at::equal(weights.get("inner.conv.weight", {3, 2, 1, 1}), at::arange(6.0).reshape({3, 2, 1, 1}) * 0.25));
  CHECK(at::equal(weights.get("inner.conv.bias"), at::tensor({1.0f, 2.0f, 3.0f})));
  CHECK(at::equal(weights.get("inner.running"), at::arange(3, at::kDouble)));
  CHECK(at::equal(weights.get("inner.table"), at::arange(6, at::kLong).reshape({2, 3})));
  CHECK(weights.get("scale").scalar_type() == at::kBFloat16);
  CHECK_FALSE(weights.get("scale").requires_grad());
  CHECK(weights.source_of("scale") == pt_file.string());
  CHECK(io::WeightMap::load(dir / "model.ts").size() == 5);
}

TEST_CASE("a broken TorchScript archive gives WeightError naming the file", "[io][torchscript]") {
  TempDir dir("torchscript_broken");
  sjd::testing::write_file(dir / "broken.pt", "this is not a zip archive");
  CHECK_THROWS_AS(io::WeightMap::load(dir / "broken.pt"), io::WeightError);
  CHECK_THROWS_WITH(io::WeightMap::load(dir / "broken.pt"), Contains((dir / "broken.pt").string()));
  CHECK_THROWS_WITH(io::WeightMap::load(dir / "absent.ts"), Contains("absent.ts") && Contains("no such file"));
}
