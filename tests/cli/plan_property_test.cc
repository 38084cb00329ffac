// End to end on random graphs: the greedy, PlanGraph, `plan`'s file and a
// re-simulation from that file alone agree.
#include <filesystem>
#include <sstream>

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/cli/commands.h"
#include "ckptplan/emit/json_writer.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/plan/selector.h"
#include "cli_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;

// Writes `text` to a file under this process's scratch dir; returns its path.
std::string TempFile(const std::string& name, const std::string& text) {
  static const std::string dir = testing::ScratchDir("plan_property");
  std::string path = dir + "/" + name;
  WriteFileAtomic(path, text);
  return path;
}

TEST_CASE("property: on random training graphs plans fit, re-simulate from the plan file, "
          "never raise the peak, and infeasible budgets are reported") {
  int feasible = 0, infeasible = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 2 + static_cast<int>(seed % 7);
    random.width = 1 + static_cast<int>(seed % 4);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    Graph graph = RandomTrainingGraph(random);
    const std::string graph_path = TempFile("graph.json", GraphToJson(graph));
    const int64_t reserve = static_cast<int64_t>(seed % 3) * 100;
    SimOptions sim_options;
    sim_options.reserve_bytes = reserve;
    const int64_t save_all_peak = Simulate(graph, SaveAll(graph), sim_options).peak_bytes;
    const LowerBound bound = ComputeLowerBound(graph, reserve);
    for (double fraction : {1.0, 0.9, 0.75, 0.6, 0.4}) {
      CAPTURE(seed);
      CAPTURE(fraction);
      const int64_t budget = static_cast<int64_t>(fraction * save_all_peak);
      GreedyOptions greedy_options{budget, reserve};
      GreedyResult greedy = GreedyPlan(graph, SaveAll(graph), greedy_options);
      // The greedy never raises the peak, drop after drop.
      SaveSet keep = SaveAll(graph);
      int64_t previous = save_all_peak;
      for (TensorId t : greedy.drops) {
        keep[t] = 0;
        int64_t peak = Simulate(graph, keep, sim_options).peak_bytes;
        CHECK(peak <= previous);
        previous = peak;
      }
      CHECK(greedy.peak >= bound.bytes);  // no plan beats the lower bound

      PlanOptions options;
      options.graph_path = graph_path;
      options.budget_bytes = budget;
      options.reserve_bytes = reserve;
      options.output_path = graph_path + ".plan.json";
      fs::remove(options.output_path);
      std::ostringstream out;
      // `plan` runs the default planner, which fits wherever the greedy does.
      PlannerOptions planner_options;
      planner_options.budget_bytes = budget;
      planner_options.reserve_bytes = reserve;
      const PlannerResult best = PlanGraph(graph, planner_options);
      if (greedy.fits) CHECK(best.fits);
      CHECK(best.peak >= bound.bytes);
      if (!best.fits) {
        CHECK_THROWS_AS(RunPlan(options, out), InfeasibleError);
        CHECK_FALSE(fs::exists(options.output_path));
        ++infeasible;
        continue;
      }
      REQUIRE(RunPlan(options, out) == kExitOk);
      ++feasible;
      // Re-simulate from the plan file alone.
      LoadedPlan plan = ReadPlan(graph, options.output_path);
      SimOptions replay;
      replay.reserve_bytes = plan.reserve_bytes;
      const int64_t replayed = Simulate(graph, plan.keep, replay).peak_bytes;
      CHECK(replayed <= budget);
      CHECK(replayed == plan.predicted_peak_bytes);
      CHECK(plan.budget_bytes == budget);
    }
  }
  // The corpus exercises both outcomes.
  CHECK(feasible > 100);
  CHECK(infeasible > 20);
  MESSAGE("random plans: " << feasible << " feasible, " << infeasible << " infeasible");
}

}  // namespace
}  // namespace ckptplan
