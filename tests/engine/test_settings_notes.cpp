// The notes a run prints for settings its method ignores: each names the setting and why, and a
// setting the method uses gets none.
#include <catch2/catch.hpp>

#include "engine/settings.h"

using namespace sjd;

namespace {

engine::GenerationSettings with_method(const std::string& method) {
  engine::GenerationSettings s;
  s.method = method;
  return s;
}

}  // namespace

TEST_CASE("a note names each setting the method ignores, and none the method uses", "[engine][settings]") {
  engine::GenerationSettings s = with_method("ar");
  CHECK(engine::ignored_settings_note(s).empty());
  s.window = 4;
  CHECK(engine::ignored_settings_note(s) == "note: ar decodes one token a step, so window 4 is ignored");
  s.pd_k = 3;
  CHECK(engine::ignored_settings_note(s) ==
        "note: ar decodes one token a step, so window 4 is ignored\n"
        "note: only sjd-pac grows draft trees, so pd_k is ignored by ar");
  s.pd_depth = 2;
  CHECK_THAT(engine::ignored_settings_note(s), Catch::EndsWith("so pd_k and pd_depth are ignored by ar"));

  s = with_method("sjd");
  s.window = 4;
  CHECK(engine::ignored_settings_note(s).empty());  // sjd drafts a window
  s.pd_depth = 2;
  CHECK(engine::ignored_settings_note(s) == "note: only sjd-pac grows draft trees, so pd_depth is ignored by sjd");

  s = with_method("sjd-pac");
  s.window = 8;
  s.pd_k = 2;
  s.pd_depth = 1;
  CHECK(engine::ignored_settings_note(s).empty());

  s = with_method("jacobi");
  s.temperature = 0.5;
  CHECK(engine::ignored_settings_note(s) == "note: jacobi decodes greedily (argmax), so temperature 0.5 is ignored");
  CHECK(engine::ignored_settings_note(with_method("no-such-method")).empty());  // refused where the method is made
}
