// The compare table and compare.json read from a report's rows: what they say when runs of one
// method took very different times.
#include <catch2/catch.hpp>

#include <regex>

#include "engine/compare.h"

using namespace sjd::engine;

namespace {

CompareRow row_of(const std::string& entry, int runs, double fastest, double slowest) {
  CompareRow row;
  row.entry = row.method = entry;
  row.exactness = "exact";
  row.runs = runs;
  row.steps = 300.0;
  row.step_compression = 3.5;
  row.seconds_min = fastest;
  row.seconds_max = slowest;
  row.seconds = (fastest + slowest) / 2.0;
  return row;
}

}  // namespace

TEST_CASE("compare notes a method whose runs' seconds spread past 1.5x, and compare.json keeps the spread",
          "[compare]") {
  CompareReport report;
  report.rows = {row_of("ar", 4, 2.28, 4.26), row_of("sjd", 4, 1.00, 1.40), row_of("sjd-pac", 1, 1.0, 1.0)};
  const std::string table = format_table(report);
  CHECK_THAT(table, Catch::Contains("note: ar's runs took 2.28 to 4.26 s each: the machine's load varied"));
  CHECK(table.find("note: sjd") == std::string::npos);  // 1.4x: within what a machine's noise gives
  // No window: ar's L is "-", not 0.0.
  CHECK(std::regex_search(table, std::regex(R"(\nar +exact +300\.0 +3\.50x +- )")));
  const nlohmann::json json = to_json(report, CompareOptions{});
  CHECK(json["methods"][0]["seconds_min"] == 2.28);
  CHECK(json["methods"][0]["seconds_max"] == 4.26);
  CHECK(json["settings"]["batch_size"] == 1);  // "auto": one run at a time
}
