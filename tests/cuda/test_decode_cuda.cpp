// The decoding loop with a model whose logits are on the device: the logits
// pipeline runs there (the fused kernel, reached through
// sampling::run_logits_pipeline) and so does the verification
// (decoding::DeviceVerifier). On the same device probabilities every method must
// commit what the CPU verifier commits; greedy decoding must give the CPU's tokens
// (the kernel's greedy point masses are exact); and batching on the device must
// give every sequence its batch-1 tokens.
#include <catch2/catch.hpp>

#include <limits>
#include <map>
#include <optional>
#include <string>

#include "decoding/decoder.h"
#include "device_cases.h"
#include "sampling/cuda_ops.h"
#include "sampling/logits_pipeline.h"
#include "table_model.h"

using namespace sjd;

namespace {

// The tests' table model, with its logits handed over on the CUDA device.
class DeviceTableModel : public testing::TableModel {
 public:
  explicit DeviceTableModel(testing::TableModelSpec spec = {}) : TableModel(spec) {}
  at::Device device() const override { return cuda_testing::device(); }
  at::Tensor forward_rows(const std::vector<model::RowWindow>& windows) override {
    return TableModel::forward_rows(windows).to(cuda_testing::device());
  }
};

// Three rows of four image tokens, each ended by the forced newline 4.
family::TokenLayout layout() {
  std::vector<int64_t> forced;
  for (int r = 0; r < 3; ++r) forced.insert(forced.end(), {-1, -1, -1, -1, 4});
  return family::TokenLayout(6, forced, 3, 4, 1, 3);
}

// `method`, or "method/init" with another draft initialisation (e.g. "sjd/sample-up").
decoding::DecodeRequest request_for(const std::string& method, int index) {
  decoding::DecodeRequest r;
  const size_t slash = method.find('/');
  r.method = decoding::make_method(method.substr(0, slash));
  if (slash != std::string::npos) r.method.init = decoding::parse_init_scheme(method.substr(slash + 1));
  r.method.window = 5;
  r.method.pd_k = 3;
  r.method.pd_depth = 2;
  r.rows = testing::table_rows(/*cfg=*/true, index % 4);
  r.pipeline.cfg_scale = 2.0;
  r.pipeline.temperature = r.method.greedy ? 0.0 : 1.0;
  r.seed = 200 + static_cast<uint64_t>(index);
  r.id = index;
  return r;
}

// Every third request verified on the host (the CPU verifier of the device's probabilities) when `mixed`.
decoding::DecodeRequest mixed_request(const std::string& method, int index, bool mixed) {
  decoding::DecodeRequest r = request_for(method, index);
  r.verify_on_host = mixed && index % 3 == 1;
  return r;
}

std::map<int64_t, std::vector<int64_t>> run_batched(model::TokenModel& model, const std::string& method, int count,
                                                    int sequences, bool mixed = false) {
  decoding::BatchCapacity capacity;
  capacity.sequences = sequences;
  capacity.rows_per_sequence = 2;
  capacity.prompt_tokens = 4;
  capacity.prompt_position = 3;
  capacity.window_nodes = 200;
  std::map<int64_t, std::vector<int64_t>> out;
  int next = 0;
  decoding::decode_batch(
      model, layout(), capacity,
      [&]() -> std::optional<decoding::DecodeRequest> {
        if (next == count) return std::nullopt;
        return mixed_request(method, next++, mixed);
      },
      [&](const decoding::DecodeRequest& request, decoding::DecodeResult result) {
        out[request.id] = std::move(result.tokens);
      });
  return out;
}

}  // namespace

TEST_CASE("the logits pipeline takes CUDA logits to the fused kernel and leaves the probabilities there", "[cuda]") {
  const at::Device device = cuda_testing::device();
  const at::Tensor logits = at::randn({2, 5, 300}).to(device);
  const std::vector<sampling::SlotConstraint> constraints(5);
  sampling::PipelineSettings settings;
  settings.cfg_scale = 3.0;
  settings.top_k = 40;
  const at::Tensor probs = sampling::run_logits_pipeline(logits, constraints, settings);
  CHECK(probs.is_cuda());
  const at::Tensor kernel = sampling::cuda::run_logits_pipeline(
      logits, sampling::cuda::upload_constraints(constraints, 300, device), settings);
  CHECK(at::equal(probs, kernel));
}

TEST_CASE("decoding with device verification commits what the CPU verifier commits on the same probabilities",
          "[cuda]") {
  struct Variant {
    std::string method;
    decoding::InitScheme init;
    sampling::RelaxKind relax;
    bool automatic = false;  // --window auto (and K, D auto for sjd-pac)
  };
  const std::vector<Variant> variants = {
      {"ar", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},
      {"jacobi", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},
      {"sjd", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},
      {"sjd", decoding::InitScheme::kSampleUp, sampling::RelaxKind::kNone},   // initial drafts from stale device p
      {"sjd", decoding::InitScheme::kRepeatLeft, sampling::RelaxKind::kCool},  // lossy, one-hot initial q
      {"scd-mc", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},
      {"scd-gs", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},
      {"sjd-pac", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone},  // candidate draws on the device
      {"sjd-pac", decoding::InitScheme::kSampleLeft, sampling::RelaxKind::kNone},  // stale p's of off-spine slots
      {"sjd-pac", decoding::InitScheme::kRandom, sampling::RelaxKind::kNone, true},
      {"scd-mc", decoding::InitScheme::kRandom, sampling::RelaxKind::kUniform},
  };
  for (const Variant& v : variants) {
    int64_t tree_windows = 0;
    for (int i = 0; i < 6; ++i) {
      decoding::DecodeRequest on_device = request_for(v.method, i);
      if (v.method != "ar") on_device.method.init = v.init;
      on_device.method.relax.kind = v.relax;
      on_device.method.auto_window = v.automatic;
      on_device.method.auto_tree = v.automatic && on_device.method.proactive_tree;
      decoding::DecodeRequest on_host = on_device;
      on_host.verify_on_host = true;
      DeviceTableModel model_a, model_b;
      const decoding::DecodeResult got = decoding::decode(model_a, layout(), on_device);
      const decoding::DecodeResult expected = decoding::decode(model_b, layout(), on_host);
      INFO(on_device.method.describe() << ", request " << i);
      CHECK(got.stats.verifier.rfind("cuda", 0) == 0);
      CHECK(expected.stats.verifier == "cpu");
      CHECK(got.tokens == expected.tokens);
      CHECK(got.stats.committed_at_step == expected.stats.committed_at_step);
      CHECK(got.stats.tree_windows == expected.stats.tree_windows);
      CHECK(got.stats.sibling_accepts == expected.stats.sibling_accepts);
      tree_windows += got.stats.tree_windows;
    }
    if (v.method == "sjd-pac") CHECK(tree_windows > 0);  // the tree path was exercised
  }
}

TEST_CASE("decoding with device logits: greedy tokens equal the CPU's", "[cuda]") {
  for (int i = 0; i < 4; ++i) {
    testing::TableModel on_cpu({});
    DeviceTableModel on_device;
    INFO("request " << i);
    CHECK(decoding::decode(on_device, layout(), request_for("jacobi", i)).tokens ==
          decoding::decode(on_cpu, layout(), request_for("jacobi", i)).tokens);
  }
}

TEST_CASE("decoding with device logits that are not finite fails as on the CPU, greedy included", "[cuda]") {
  // Token 2's logit of the unconditional row replaced: the mixed row's largest logit is not finite.
  for (const char* method : {"ar", "jacobi", "sjd", "sjd-pac"}) {
    for (float value : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      INFO(method << " logit " << value);
      decoding::DecodeRequest request = request_for(method, 0);
      request.pipeline.temperature = 0.0;
      testing::TableModelSpec spec;
      spec.poisoned_logit = value;
      DeviceTableModel poisoned(spec);
      CHECK_THROWS_WITH(decoding::decode(poisoned, layout(), request),
                        Catch::Contains("no token has a positive probability"));
    }
  }
}

TEST_CASE("decoding with device logits: every sequence of a batch gets its batch-1 tokens", "[cuda]") {
  const int count = 7;
  // sample-up: every sequence's initial drafts from stale p's in one draw per step.
  for (const std::string method : {"ar", "sjd", "sjd/sample-up", "scd-mc", "sjd-pac"}) {
    DeviceTableModel single;
    std::map<int64_t, std::vector<int64_t>> alone;
    for (int i = 0; i < count; ++i) alone[i] = decoding::decode(single, layout(), request_for(method, i)).tokens;
    DeviceTableModel batched_model;
    INFO(method);
    CHECK(run_batched(batched_model, method, count, 3) == alone);
    for (const auto& [id, tokens] : alone) CHECK(static_cast<int64_t>(tokens.size()) == layout().length());
  }
}

TEST_CASE("a batch of device- and host-verified sequences: each gets its batch-1 tokens", "[cuda]") {
  // The loop queues the device verifications first and reads their verdicts in one copy; the
  // host-verified sequences between them must neither shift nor take another's verdict.
  const int count = 7;
  for (const std::string method : {"ar", "sjd-pac", "sjd/sample-up"}) {
    DeviceTableModel single;
    std::map<int64_t, std::vector<int64_t>> alone;
    for (int i = 0; i < count; ++i) alone[i] = decoding::decode(single, layout(), mixed_request(method, i, true)).tokens;
    DeviceTableModel batched_model;
    INFO(method);
    CHECK(run_batched(batched_model, method, count, 3, /*mixed=*/true) == alone);
  }
}
