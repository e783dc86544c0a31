// Logits that are not finite stop a decode with "no token has a positive probability" at every
// temperature, greedy decoding included: an argmax over them would take a NaN as the largest logit on
// the CPU and skip it on the GPU, each device quietly committing a token of its own.
#include <catch2/catch.hpp>

#include <limits>

#include "table_model.h"

using namespace sjd;

namespace {

// The table model with token 2's logit of the unconditional row replaced by `value`; guidance carries it
// into the mixed logits.
testing::TableModel poisoned_model(float value) {
  testing::TableModelSpec spec;
  spec.poisoned_logit = value;
  return testing::TableModel(spec);
}

decoding::DecodeRequest greedy_request(const std::string& method) {
  decoding::DecodeRequest r = testing::table_request(method, 3, "repeat-up", /*cfg=*/true, /*top_k=*/0);
  r.pipeline.temperature = 0.0;
  r.seed = 7;
  return r;
}

}  // namespace

TEST_CASE("greedy decoding of logits that are not finite fails as sampling does, for every method",
          "[decoding][robustness]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const char* method : {"ar", "jacobi", "sjd", "scd-mc", "sjd-pac"}) {
    INFO(method);
    testing::TableModel finite = poisoned_model(-1.0f);  // the control: a finite value decodes
    CHECK(decoding::decode(finite, testing::small_layout(), greedy_request(method)).tokens.size() ==
          static_cast<size_t>(testing::small_layout().length()));
    for (float value : {nan, inf}) {
      INFO("logit " << value);
      testing::TableModel poisoned = poisoned_model(value);
      CHECK_THROWS_WITH(decoding::decode(poisoned, testing::small_layout(), greedy_request(method)),
                        Catch::Contains("no token has a positive probability"));
    }
  }
}
