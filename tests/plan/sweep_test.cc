#include "ckptplan/plan/sweep.h"

#include <filesystem>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/loader.h"
#include "cli_util.h"

namespace ckptplan {
namespace {

constexpr int64_t kMiB = 1 << 20;

std::string Sample(const std::string& name) {
  return std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/" + name;
}

// More budget never means more recompute, and never infeasible again.
void CheckMonotone(const SweepResult& sweep) {
  for (size_t i = 1; i < sweep.rows.size(); ++i) {
    const SweepRow& smaller = sweep.rows[i - 1];
    const SweepRow& larger = sweep.rows[i];
    CHECK(larger.budget_bytes > smaller.budget_bytes);
    if (smaller.feasible) {
      CHECK(larger.feasible);
      CHECK(larger.recompute_cost <= smaller.recompute_cost);
    }
  }
}

TEST_CASE("sweep: budgets") {
  CHECK(LinearBudgets(20, 80, 4) == std::vector<int64_t>{20, 40, 60, 80});
  CHECK(LinearBudgets(5, 9, 1) == std::vector<int64_t>{5});
  CHECK(ParseBudgetList("1KiB,2048", "budgets") == std::vector<int64_t>{1024, 2048});
  CHECK_THROWS_AS(LinearBudgets(80, 20, 4), InputError);
  CHECK_THROWS_AS(LinearBudgets(20, 80, 0), InputError);
  CHECK_THROWS_AS(ParseBudgetList("1KiB,,2KiB", "budgets"), InputError);
}

TEST_CASE("sweep: transformer block trade-off is monotone") {
  Graph graph = LoadGraph(Sample("transformer_block.json"), {}).graph;
  // 270 MiB .. 340 MiB in 5 MiB steps; save-all peaks at 330.1 MiB, the
  // lower bound is 280.1 MiB.
  SweepResult sweep = RunSweep(graph, LinearBudgets(270 * kMiB, 340 * kMiB, 15), {});
  REQUIRE(sweep.rows.size() == 15);
  CheckMonotone(sweep);
  CHECK_FALSE(sweep.rows.front().feasible);  // 270 MiB < lower bound
  CHECK(sweep.rows.back().feasible);         // 340 MiB > save-all peak
  CHECK(sweep.rows.back().recompute_cost == 0);
  CHECK(sweep.lowest_peak_bytes >= sweep.lower_bound.bytes);
  for (const SweepRow& row : sweep.rows) {
    if (row.feasible) CHECK(row.peak_bytes <= row.budget_bytes);
    if (!row.feasible) CHECK(row.budget_bytes < sweep.lowest_peak_bytes);
  }
  SUBCASE("every baseline strategy gives a monotone curve too") {
    for (Strategy s : AllStrategies()) {
      PlannerOptions options;
      options.strategy = s;
      CheckMonotone(RunSweep(graph, LinearBudgets(270 * kMiB, 340 * kMiB, 8), options));
    }
  }
}

TEST_CASE("sweep: CLI table and JSON") {
  using testing::RunCli;
  const std::string graph = "sample_graphs/transformer_block.json";
  testing::CliResult run = RunCli("sweep " + graph + " --budgets 250MiB,300MiB,340MiB --json");
  REQUIRE(run.code == kExitOk);
  nlohmann::json json = nlohmann::json::parse(run.out);
  REQUIRE(json["rows"].size() == 3);
  CHECK(json["rows"][0]["feasible"] == false);  // below the 280.1 MiB lower bound
  CHECK(json["rows"][2]["feasible"] == true);
  CHECK(json["rows"][2]["recompute_cost"] == 0);
  CHECK(json["lower_bound_bytes"].get<int64_t>() <= json["lowest_peak_bytes"].get<int64_t>());
  CHECK(RunCli("sweep " + graph + " --budgets 250MiB,300MiB,340MiB --json").out ==
        run.out);  // deterministic

  run = RunCli("sweep " + graph + " --from 280MiB --to 340MiB --steps 4");
  REQUIRE(run.code == kExitOk);
  CHECK(run.out.find("lowest peak reached 296.1 MiB, lower bound 280.1 MiB") != std::string::npos);
  CHECK(run.out.find("NO") != std::string::npos);  // 280 MiB is infeasible
  CHECK(RunCli("sweep " + graph + " --from 280MiB --steps 4").code == kExitUsage);
  const std::string dir = testing::ScratchDir("sweep_report");
  REQUIRE(RunCli("sweep " + graph + " --budgets 250MiB,340MiB --report " + dir + "/r.html").code ==
          kExitOk);
  CHECK(testing::Slurp(dir + "/r.html").find("Budget sweep") != std::string::npos);
  CHECK(RunCli("sweep " + graph + " --budgets 340MiB --trace " + dir + "/t.json").code ==
        kExitUsage);
  CHECK_FALSE(std::filesystem::exists(dir + "/t.json"));
  CHECK(RunCli("sweep " + graph + " --budgets 1GiB --steps 4").code == kExitUsage);
  run = RunCli("sweep " + graph + " --budgets 1GiB --strategy best");
  CHECK(run.code == kExitUsage);
  CHECK(run.err.find("--strategy: unknown strategy 'best'") != std::string::npos);
}

}  // namespace
}  // namespace ckptplan
