// The step-cost profile the automatic windows read: curves per row count,
// interpolation between them, the JSON layouts (current and the one-curve one
// of earlier versions) and the errors that name what is wrong.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "decoding/run_stats.h"
#include "decoding/step_cost.h"
#include "decoding/window_planner.h"

using sjd::decoding::StepCostCurve;
using sjd::decoding::StepCostProfile;

namespace {

// Two measured row counts: 2 rows (batch 1 with CFG) and 16 rows (batch 8).
StepCostProfile two_curves() {
  return StepCostProfile("test", {StepCostCurve{16, {{1, 3.0}, {2, 4.0}, {4, 6.0}}},
                                  StepCostCurve{2, {{1, 1.0}, {2, 1.2}, {4, 1.6}, {8, 2.4}, {16, 4.0}}}});
}

}  // namespace

TEST_CASE("step cost: a measured row count reads its own curve", "[decoding][step_cost]") {
  const StepCostProfile p = two_curves();
  REQUIRE(p.curves().size() == 2);
  CHECK(p.curves()[0].rows == 2);  // kept sorted by rows
  CHECK(p.ms(1, 2) == Approx(1.0));
  CHECK(p.ms(4, 2) == Approx(1.6));
  CHECK(p.ms(3, 2) == Approx(1.4));  // linear between points
  CHECK(p.ms(1, 16) == Approx(3.0));
  CHECK(p.ms(2, 16) == Approx(4.0));
  // 16 rows of one token cost what they were measured to cost, not 2 rows of 8 tokens (2.4 ms).
  CHECK(p.ms(1, 16) != Approx(p.ms(8, 2)));
}

TEST_CASE("step cost: between measured row counts the cost is linear in rows", "[decoding][step_cost]") {
  const StepCostProfile p = two_curves();
  // 9 rows: half way from 2 to 16.
  CHECK(p.ms(1, 9) == Approx(2.0));
  CHECK(p.ms(2, 9) == Approx(2.6));
  CHECK(p.ms(4, 9) == Approx(3.8));
}

TEST_CASE("step cost: beyond the measured rows the nearest curve scales its token axis", "[decoding][step_cost]") {
  const StepCostProfile p = two_curves();
  CHECK(p.ms(1, 32) == Approx(4.0));  // 32 rows of 1 token = 16 rows of 2
  CHECK(p.ms(2, 32) == Approx(6.0));
  CHECK(p.ms(1, 1) == Approx(1.0));   // fewer rows than measured: never below the smallest step
  // One curve (the layout of earlier versions) scales for every other row count.
  const StepCostProfile one("one", 2, {{1, 1.0}, {8, 2.4}, {16, 4.0}});
  CHECK(one.ms(1, 16) == Approx(2.4));
  CHECK(one.ms(2, 16) == Approx(4.0));
}

TEST_CASE("step cost: JSON round trip, and the one-curve layout of earlier versions still reads",
          "[decoding][step_cost]") {
  const StepCostProfile p = two_curves();
  const nlohmann::json j = p.to_json();
  REQUIRE(j.contains("curves"));
  const StepCostProfile back = StepCostProfile::from_json(j, "f.json");
  CHECK(back.to_json() == j);
  CHECK(back.ms(2, 9) == Approx(2.6));

  const nlohmann::json legacy = {{"name", "old"}, {"rows", 2}, {"points", {{1, 1.5}, {4, 2.5}}}};
  const StepCostProfile old = StepCostProfile::from_json(legacy, "old.json");
  REQUIRE(old.curves().size() == 1);
  CHECK(old.curves()[0].rows == 2);
  CHECK(old.ms(4, 2) == Approx(2.5));
  CHECK_THAT(old.summary(), Catch::StartsWith("old rows=2 1:1.5,4:2.5"));
  CHECK_THAT(p.summary(), Catch::Contains("; rows=16 1:3,2:4,4:6"));
}

TEST_CASE("step cost: bad profiles name the file, the curve and what is wrong", "[decoding][step_cost]") {
  const auto error_of = [](const nlohmann::json& j) {
    try {
      StepCostProfile::from_json(j, "p.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json good_points = {{1, 1.0}, {2, 2.0}};
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", 2}, {"points", good_points}},
                                                  {{"rows", 2}, {"points", good_points}}}}}),
             Catch::Contains("two curves for rows=2"));
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", 4}, {"points", {{2, 1.0}, {1, 2.0}}}}}}}),
             Catch::Contains("rows=4: point 1"));
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", "two"}, {"points", good_points}}}}}),
             Catch::Contains("p.json: /curves/0/rows"));
  CHECK_THAT(error_of({{"name", "x"}, {"curves", nlohmann::json::array()}}),
             Catch::Contains("no curves"));
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", 2}, {"points", {{1, -1.0}}}}}}}),
             Catch::Contains("positive finite ms"));
  // Integers past an int are refused, not wrapped (2^32 + 2 rows read as 2, 2^32 + 1 tokens as 1).
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", 4294967298ull}, {"points", good_points}}}}}),
             Catch::Contains("/curves/0/rows: expected an integer (got 4294967298)"));
  CHECK_THAT(error_of({{"name", "x"}, {"curves", {{{"rows", 2}, {"points", {{4294967297ll, 1.0}}}}}}}),
             Catch::Contains("/curves/0/points: each point is [tokens, ms] (got [4294967297,1.0])"));
}

TEST_CASE("window planner: the curve of the batch's own row count decides the window", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd");
  sjd.auto_window = true;
  // At 2 rows a draft costs as much as an AR step; at 16 rows (a full batch whose
  // attention dominates) drafts are nearly free.
  std::vector<std::pair<int, double>> steep, flat;
  for (int t = 1; t <= 64; t *= 2) steep.emplace_back(t, 1.0 * t), flat.emplace_back(t, 3.0 + 0.001 * t);
  const StepCostProfile p("test", {StepCostCurve{2, steep}, StepCostCurve{16, flat}});
  const int alone = sjd::decoding::WindowPlanner(sjd, p, 2).next(false, 256).chain;
  const int batched = sjd::decoding::WindowPlanner(sjd, p, 16).next(false, 256).chain;
  INFO("chain alone " << alone << ", in a batch of 8 " << batched);
  CHECK(alone == 0);
  CHECK(batched >= 8);
  // The same profile read as one curve (scaled from 2 rows) would refuse windows at 16 rows too.
  const StepCostProfile scaled("test", 2, steep);
  CHECK(sjd::decoding::WindowPlanner(sjd, scaled, 16).next(false, 256).chain == 0);
}

TEST_CASE("window planner: the search stops early only where no longer window could pay", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd");
  sjd.auto_window = true;
  // A profile (as a user's file may give) in which mid-sized windows are ruinous but 33 tokens
  // or more cost about an AR step: the planner must look past the expensive middle.
  const StepCostProfile dip("dip", 2, {{1, 1.0}, {2, 1000.0}, {32, 1000.0}, {33, 1.01}, {128, 1.01}});
  CHECK(sjd::decoding::WindowPlanner(sjd, dip, 2).next(false, 256).chain >= 32);
  // Free windows: the longest chain wins, as without any early stop.
  const StepCostProfile free_windows("free", 2, {{1, 1.0}, {256, 1.0}});
  CHECK(sjd::decoding::WindowPlanner(sjd, free_windows, 2).next(false, 256).chain ==
        sjd::decoding::WindowPlanner::kMaxAutoChain);
}

TEST_CASE("window planner: a measured prior decides the window before any outcome", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd");
  sjd.auto_window = true;
  // Each draft costs half an AR step: at the generic prior no window pays, at 0.9 one does.
  const StepCostProfile half("half", 2, {{1, 1.0}, {2, 1.5}, {3, 2.0}, {5, 3.0}, {9, 5.0}, {65, 33.0}});
  CHECK(sjd::decoding::WindowPlanner(sjd, half, 2).next(false, 256).chain == 0);
  CHECK(sjd::decoding::WindowPlanner(sjd, half, 2, {{0.9, 0.9, 0.9}}).next(false, 256).chain >= 2);
  CHECK(sjd::decoding::WindowPlanner(sjd, half, 2, {{0.9, 0.9, 0.9}}).prior_by_age() ==
        std::vector<double>{0.9, 0.9, 0.9});
  // Without a model's own prior: the generic one, rounded from the first default model's measured acceptance
  // by draft age (0.15, 0.5, 0.7-0.75; window_planner.cpp), rising with age as Jacobi iterations settle drafts.
  const std::vector<double> generic = sjd::decoding::WindowPlanner(sjd, half, 2).prior_by_age();
  CHECK(generic == std::vector<double>{0.2, 0.5, 0.65});
  CHECK(std::is_sorted(generic.begin(), generic.end()));
}

TEST_CASE("window planner: one that does not learn keeps its window whatever the drafts do", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd");
  sjd.auto_window = true;
  const StepCostProfile half("half", 2, {{1, 1.0}, {2, 1.5}, {3, 2.0}, {5, 3.0}, {9, 5.0}, {65, 33.0}});
  using sjd::decoding::WindowReport;
  using sjd::decoding::WindowShape;
  for (const bool learn : {true, false}) {
    sjd::decoding::WindowPlanner planner(sjd, half, 2, {{0.9, 0.9, 0.9}, learn});
    const WindowShape first = planner.next(false, 256);
    REQUIRE(first.chain >= 2);
    // Twenty windows whose first draft is rejected at once.
    for (int i = 0; i < 20; ++i) planner.record(WindowReport{first, std::vector<int>(first.chain, 1), 0, true});
    INFO("learn " << learn);
    CHECK(planner.learns() == learn);
    CHECK((planner.next(false, 256).chain == first.chain) == !learn);  // a learner gives up on windows
    CHECK(planner.tallies()[1].tested == 20);  // both still count what they saw (stats.json)
  }
}

TEST_CASE("window planner: drafts tested and accepted are tallied by age, forced tokens and tree levels apart",
          "[decoding][step_cost]") {
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd-pac");
  sjd.auto_window = true;
  sjd::decoding::WindowPlanner planner(sjd, StepCostProfile("test", 2, {{1, 1.0}, {64, 2.0}}), 2);
  using sjd::decoding::WindowReport;
  using sjd::decoding::WindowShape;
  // Chain of 5: ages 0, 1, a forced token, 3, 40; two drafts and the forced token pass, age 3 is rejected.
  planner.record(WindowReport{WindowShape{5, 1, 0}, {0, 1, -1, 3, 40}, 3, true});
  // A tree window: its first level (K = 2) is a tree level, not a chain draft of some age.
  planner.record(WindowReport{WindowShape{3, 2, 1}, {0, 0, 0}, 3, false});
  // An AR step tests nothing.
  planner.record(WindowReport{WindowShape{0, 1, 0}, {}, 0, false});
  const auto& t = planner.tallies();
  REQUIRE(t.size() == static_cast<size_t>(sjd::decoding::WindowPlanner::kAgeBins));
  CHECK(t[0].tested == 3);  // one from the first window, two from the second (levels 2 and 3)
  CHECK(t[0].accepted == 3);
  CHECK(t[1].tested == 1);
  CHECK(t[1].accepted == 1);
  CHECK(t[3].tested == 1);
  CHECK(t[3].accepted == 0);
  CHECK(t.back().tested == 0);  // age 40 was never reached: the window stopped at age 3
}

TEST_CASE("window planner: a forced token inside a tree window is no tree level passing", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig pac = sjd::decoding::make_method("sjd-pac");
  pac.auto_window = true;
  const StepCostProfile profile("test", 2, {{1, 1.0}, {64, 2.0}});
  using sjd::decoding::WindowReport;
  using sjd::decoding::WindowShape;
  // Levels of two candidates: the first passes, the second is a row end, the third is rejected.
  sjd::decoding::WindowPlanner with_row_end(pac, profile, 2);
  with_row_end.record(WindowReport{WindowShape{4, 2, 3}, {0, -1, 0, 0}, 2, true});
  // The same two tree levels without the row end between them.
  sjd::decoding::WindowPlanner without(pac, profile, 2);
  without.record(WindowReport{WindowShape{3, 2, 2}, {0, 0, 0}, 1, true});
  const sjd::decoding::WindowPlanner fresh(pac, profile, 2);
  INFO("expected tree acceptance: " << with_row_end.tree_acceptance(2, 0.5) << " with the row end, "
                                    << without.tree_acceptance(2, 0.5) << " without, "
                                    << fresh.tree_acceptance(2, 0.5) << " before any window");
  CHECK(with_row_end.tree_acceptance(2, 0.5) == Approx(without.tree_acceptance(2, 0.5)));
  CHECK(with_row_end.tree_acceptance(2, 0.5) < fresh.tree_acceptance(2, 0.5));  // one of two levels failed
}

TEST_CASE("window planner: a tree level of one candidate is counted as its chain draft", "[decoding][step_cost]") {
  sjd::decoding::MethodConfig pac = sjd::decoding::make_method("sjd-pac");
  pac.auto_window = true;
  const StepCostProfile profile("test", 2, {{1, 1.0}, {64, 2.0}});
  using sjd::decoding::WindowReport;
  using sjd::decoding::WindowShape;
  // Two tree levels; the first passes, the second is rejected. In `point_mass` the first level's q held one token
  // (a repeat-up initial draft at age 0), so only its chain draft was tried.
  sjd::decoding::WindowPlanner point_mass(pac, profile, 2);
  point_mass.record(WindowReport{WindowShape{3, 2, 2}, {0, 1, 1}, 1, true, {1, 2}});
  sjd::decoding::WindowPlanner both_trees(pac, profile, 2);
  both_trees.record(WindowReport{WindowShape{3, 2, 2}, {0, 1, 1}, 1, true, {2, 2}});
  CHECK(point_mass.tallies()[0].tested == 1);  // the age-0 draft, passed
  CHECK(point_mass.tallies()[0].accepted == 1);
  CHECK(both_trees.tallies()[0].tested == 0);
  CHECK(point_mass.tallies()[1].tested == 0);  // the second level was a tree level in both
  // The tree's rate learned only the failed level there, a pass and a failure here.
  INFO("tree acceptance: " << point_mass.tree_acceptance(2, 0.5) << " against " << both_trees.tree_acceptance(2, 0.5));
  CHECK(point_mass.tree_acceptance(2, 0.5) < both_trees.tree_acceptance(2, 0.5));
  // A level of a K = 3 tree where q offered two tokens is a level of two candidates.
  sjd::decoding::WindowPlanner two_of_three(pac, profile, 2);
  two_of_three.record(WindowReport{WindowShape{3, 3, 1}, {1, 1, 1}, 0, true, {2}});
  const sjd::decoding::WindowPlanner fresh(pac, profile, 2);
  CHECK(two_of_three.tree_acceptance(2, 0.5) < fresh.tree_acceptance(2, 0.5));
  CHECK(two_of_three.tree_acceptance(3, 0.5) == Approx(fresh.tree_acceptance(3, 0.5)));
}

TEST_CASE("window planner: a fixed tree with an automatic chain weighs chains shorter than the tree",
          "[decoding][step_cost]") {
  sjd::decoding::MethodConfig pac = sjd::decoding::make_method("sjd-pac");
  pac.auto_window = true;
  pac.pd_k = 4;
  pac.pd_depth = 3;
  // Every token as dear as a step: nothing beats the AR step, which has no room for a tree.
  const StepCostProfile dear("test", 2, {{1, 1.0}, {512, 512.0}});
  const sjd::decoding::WindowPlanner dear_planner(pac, dear, 2);
  CHECK(dear_planner.next(true, 256).chain == 0);
  // Windows nearly free: the whole tree, cut to the chain when fewer positions than its depth are left.
  const StepCostProfile cheap("test", 2, {{1, 1.0}, {512, 1.1}});
  const sjd::decoding::WindowPlanner cheap_planner(pac, cheap, 2);
  const auto full = cheap_planner.next(true, 256);
  CHECK(full.tree_k == 4);
  CHECK(full.tree_depth == 3);
  const auto end = cheap_planner.next(true, 2);
  CHECK(end.chain == 2);
  CHECK(end.tree_k == 4);
  CHECK(end.tree_depth == 2);
}

TEST_CASE("run stats: drafts by age in JSON, the last bin labelled as the older ones, empty bins left out",
          "[decoding][step_cost]") {
  sjd::decoding::RunStats stats;
  stats.drafts_by_age = {{4, 3}, {0, 0}, {2, 1}};
  const auto j = sjd::decoding::to_json(stats)["windows"]["drafts_by_age"];
  REQUIRE(j.size() == 2);
  CHECK(j[0]["age"] == "0");
  CHECK(j[0]["rate"].get<double>() == Approx(0.75));
  CHECK(j[1]["age"] == "2+");
  CHECK(j[1]["tested"] == 2);
}


TEST_CASE("window planner: the GPU's generic profile keeps the windows the CPU's would cut", "[decoding][step_cost]") {
  // Planned from the generic prior alone. On a CPU a window's tokens cost nearly as much as
  // steps, and more so in a batch; on a GPU a step reads the weights however many tokens it
  // carries, until a large batch fills the compute.
  sjd::decoding::MethodConfig sjd = sjd::decoding::make_method("sjd");
  sjd.auto_window = true;
  const auto chain = [&](const StepCostProfile& p, int rows) {
    return sjd::decoding::WindowPlanner(sjd, p, rows).next(false, 4096).chain;
  };
  const StepCostProfile cpu = StepCostProfile::generic(), gpu = StepCostProfile::generic_gpu();
  INFO("cpu: " << chain(cpu, 2) << " alone, " << chain(cpu, 32) << " in a batch of 16; gpu: " << chain(gpu, 2)
               << ", " << chain(gpu, 8) << ", " << chain(gpu, 32));
  CHECK(chain(cpu, 32) == 0);
  CHECK(chain(gpu, 2) > chain(cpu, 2));
  CHECK(chain(gpu, 8) > 0);
  CHECK(chain(gpu, 2) >= chain(gpu, 8));
  CHECK(chain(gpu, 8) >= chain(gpu, 32));
}
