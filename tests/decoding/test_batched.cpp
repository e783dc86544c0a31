// Batched decoding: every sequence of a batch gets exactly the tokens it gets
// decoded alone with the same seed, whatever shares its forward, however full
// the batch is and in whatever order sequences finish and are replaced.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "decoding/decoder.h"
#include "table_model.h"
#include "testing/statistics.h"

using namespace sjd;
using sjd::testing::TableModel;

namespace {

// Three rows of four image tokens, each row ended by the forced newline 4: 15 tokens.
family::TokenLayout batch_layout() {
  std::vector<int64_t> forced;
  for (int r = 0; r < 3; ++r) forced.insert(forced.end(), {-1, -1, -1, -1, 4});
  return family::TokenLayout(6, forced, 3, 4, 1, 3);
}

decoding::StepCostProfile test_profile() {
  return decoding::StepCostProfile("test", 1, {{1, 1.0}, {4, 1.2}, {8, 1.6}, {16, 3.0}});
}

struct MethodCase {
  std::string method;
  std::string init = "random";
  bool auto_window = false;
  std::string relax;  // "" or a lossy relaxation
};

// Request `index` of a run: its own prompt (prompts have different lengths and roles) and seed.
decoding::DecodeRequest request_for(const MethodCase& c, int index, bool cfg) {
  decoding::DecodeRequest r;
  r.method = decoding::make_method(c.method);
  r.method.window = 5;
  r.method.pd_k = 3;
  r.method.pd_depth = 2;
  r.method.init = decoding::parse_init_scheme(c.init);
  r.method.auto_window = c.auto_window && r.method.speculative();
  r.method.auto_tree = c.auto_window && r.method.proactive_tree;
  if (c.relax == "cool") {
    r.method.relax.kind = sampling::RelaxKind::kCool;
  }
  r.cost_profile = test_profile();
  r.planned_batch = 4;  // a setting: the same for the batched run and the single runs
  r.rows = sjd::testing::table_rows(cfg, index % 4);
  r.pipeline.cfg_scale = cfg ? 2.0 : 1.0;
  r.pipeline.temperature = r.method.greedy ? 0.0 : 1.0;  // jacobi decodes greedily
  r.seed = 100 + static_cast<uint64_t>(index);
  r.id = index;
  return r;
}

decoding::BatchCapacity capacity_for(int sequences, bool cfg) {
  decoding::BatchCapacity capacity;
  capacity.sequences = sequences;
  capacity.rows_per_sequence = cfg ? 2 : 1;
  capacity.prompt_tokens = 4;
  capacity.prompt_position = 3;
  capacity.window_nodes = 200;
  return capacity;
}

// Runs `count` requests through one batch of `sequences`; tokens by request id, and the completion order.
std::map<int64_t, std::vector<int64_t>> run_batched(TableModel& model, const MethodCase& c, int count, int sequences,
                                                    bool cfg, std::vector<int64_t>* order = nullptr) {
  std::map<int64_t, std::vector<int64_t>> out;
  int next = 0;
  decoding::decode_batch(
      model, batch_layout(), capacity_for(sequences, cfg),
      [&]() -> std::optional<decoding::DecodeRequest> {
        if (next == count) return std::nullopt;
        return request_for(c, next++, cfg);
      },
      [&](const decoding::DecodeRequest& request, decoding::DecodeResult result) {
        CHECK(static_cast<int64_t>(result.tokens.size()) == batch_layout().length());
        out[request.id] = std::move(result.tokens);
        if (order) order->push_back(request.id);
      });
  return out;
}

const std::vector<MethodCase>& every_method() {
  static const std::vector<MethodCase> cases = {
      {"ar"},          {"jacobi"},          {"sjd"},          {"sjd", "sample-up"}, {"scd-mc"},
      {"scd-gs"},      {"sjd-pac"},         {"sjd-pac", "random", true},            {"sjd", "random", false, "cool"},
  };
  return cases;
}

}  // namespace

TEST_CASE("batched decoding: every sequence gets its batch-1 tokens, for every method and batch size",
          "[decoding][batch]") {
  const int count = 11;  // more requests than any batch: sequences are refilled as others finish
  for (const MethodCase& c : every_method()) {
    for (bool cfg : {false, true}) {
      TableModel single_model({});
      std::map<int64_t, std::vector<int64_t>> alone;
      for (int i = 0; i < count; ++i) {
        alone[i] = decoding::decode(single_model, batch_layout(), request_for(c, i, cfg)).tokens;
      }
      for (int sequences : {1, 3, 8}) {
        TableModel model({});
        std::vector<int64_t> order;
        const auto batched = run_batched(model, c, count, sequences, cfg, &order);
        INFO(c.method << " init=" << c.init << (c.auto_window ? " auto" : "") << " " << c.relax << (cfg ? " cfg" : "")
                      << " B=" << sequences);
        CHECK(batched == alone);
        CHECK(order.size() == static_cast<size_t>(count));
        // Fewer forwards than one per sequence step: the batch really shares them.
        if (sequences > 1) CHECK(model.forward_calls < single_model.forward_calls);
      }
    }
  }
}

TEST_CASE("batched decoding: sequences finish out of order and the freed rows take the next request",
          "[decoding][batch]") {
  // Speculative sequences take different numbers of steps, so some finish before one that started
  // earlier. Whether a given batch shows it is chance (every completion can happen to fall in order):
  // four batch sizes make that all but impossible.
  bool out_of_order = false;
  std::string orders;
  for (int sequences : {2, 3, 4, 5}) {
    TableModel model({});
    std::vector<int64_t> order;
    const auto batched = run_batched(model, {"sjd-pac"}, 12, sequences, true, &order);
    CHECK(batched.size() == 12);
    orders += "B=" + std::to_string(sequences) + ": " + ::Catch::Detail::stringify(order) + "\n";
    for (size_t i = 1; i < order.size(); ++i) out_of_order |= order[i] < order[i - 1];
  }
  INFO("completion orders:\n" << orders);
  CHECK(out_of_order);
}

TEST_CASE("batched decoding: the comparison with batch-1 catches logits that leak across the batch",
          "[decoding][batch]") {
  sjd::testing::TableModelSpec leaky;
  leaky.leak_across_batch = true;
  const MethodCase c{"sjd"};
  TableModel single_model(leaky);
  std::map<int64_t, std::vector<int64_t>> alone;
  for (int i = 0; i < 8; ++i) alone[i] = decoding::decode(single_model, batch_layout(), request_for(c, i, false)).tokens;
  TableModel model(leaky);
  CHECK(run_batched(model, c, 8, 4, false) != alone);
}

TEST_CASE("batched decoding: a request that does not fit the batch's capacity is refused", "[decoding][batch]") {
  TableModel model({});
  decoding::BatchCapacity capacity = capacity_for(2, false);
  capacity.prompt_tokens = 1;  // request 1 has a two-token prompt
  int next = 0;
  CHECK_THROWS_AS(decoding::decode_batch(
                      model, batch_layout(), capacity,
                      [&]() -> std::optional<decoding::DecodeRequest> { return request_for({"sjd"}, next++, false); },
                      [](const decoding::DecodeRequest&, decoding::DecodeResult) {}),
                  std::invalid_argument);
}

namespace {

// sjd-pac with CFG and an automatic window, `runs` seeds decoded 8 at a time, against the exact AR distribution.
sjd::testing::FitResult batched_fit(int runs, const decoding::Mutants& mutants = {}) {
  TableModel model({});
  const auto layout = sjd::testing::small_layout();
  decoding::DecodeRequest base;
  base.method = decoding::make_method("sjd-pac");
  base.method.auto_window = true;
  base.method.auto_tree = true;
  base.cost_profile = test_profile();
  base.rows = sjd::testing::table_rows(true);
  base.pipeline.cfg_scale = 2.0;
  const auto exact = sjd::testing::exact_distribution(model, layout, base.pipeline, 2);
  std::map<std::vector<int64_t>, long> counts;
  int next = 0;
  decoding::BatchCapacity capacity = capacity_for(8, true);
  capacity.prompt_tokens = 1;
  capacity.prompt_position = 0;
  decoding::decode_batch(
      model, layout, capacity,
      [&]() -> std::optional<decoding::DecodeRequest> {
        if (next == runs) return std::nullopt;
        decoding::DecodeRequest r = base;
        r.seed = static_cast<uint64_t>(next++);
        return r;
      },
      [&](const decoding::DecodeRequest&, decoding::DecodeResult result) { ++counts[result.tokens]; }, mutants);
  return sjd::testing::chi_square_fit(exact, counts);
}

}  // namespace

// One batched chi-square case (the exactness tests drive the single-sequence path): p > 1e-3 passes
// (with fixed seeds the outcome is deterministic); the peeking-window mutant, decoded the same batched
// way, must be rejected at p < 1e-6.
TEST_CASE("batched decoding samples the exact AR distribution", "[decoding][batch][exactness]") {
  const auto fit = batched_fit(6000);
  INFO("chi2 " << fit.chi_square << " dof " << fit.dof << " p " << fit.p_value);
  CHECK(fit.p_value > 1e-3);
  decoding::Mutants peeking;
  peeking.peeking_window = true;
  const auto broken = batched_fit(6000, peeking);
  INFO("peeking mutant: chi2 " << broken.chi_square << " p " << broken.p_value);
  CHECK(broken.p_value < 1e-6);
}

namespace {

// The table model as a GPU's graphed steps lay windows out: padded to more slots than their width.
class PaddingModel : public TableModel {
 public:
  using TableModel::TableModel;
  int64_t window_slots(int64_t width) const override { return width + 7; }
  void reserve(int64_t rows, int64_t tokens_per_row, int64_t position_limit) override {
    reserved_tokens = tokens_per_row;
    reserved_positions = position_limit;
    TableModel::reserve(rows, tokens_per_row, position_limit);
  }
  int64_t reserved_tokens = 0, reserved_positions = 0;
};

}  // namespace

TEST_CASE("batched decoding: each row's tail holds a window as wide as the model lays it out", "[decoding][batch]") {
  // Without the padding's room a row near its image's end has no space for the padded window, and
  // a GPU runs the whole batch's step eagerly.
  PaddingModel model(sjd::testing::TableModelSpec{});
  const decoding::BatchCapacity capacity = capacity_for(2, true);
  run_batched(model, {"sjd"}, 3, 2, true);
  const int64_t tail = batch_layout().length() + capacity.window_nodes + 1 + 7;
  CHECK(model.reserved_tokens == capacity.prompt_tokens + tail);
  CHECK(model.reserved_positions == capacity.prompt_position + tail);
}
