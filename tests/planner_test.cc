#include "ckptplan/planner.h"

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

#include "ckptplan/errors.h"
#include "ckptplan/loader.h"
#include "ckptplan/selector.h"
#include "ckptplan/synth.h"

namespace ckptplan {
namespace {

constexpr int64_t kMiB = 1 << 20;

Graph TransformerBlock() {
  return LoadGraph(std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/transformer_block.json", {})
      .graph;
}

TEST_CASE("planner: reaches 300 MiB on the transformer block where the greedy stalls") {
  Graph graph = TransformerBlock();
  GreedyOptions greedy;
  greedy.budget_bytes = 300 * kMiB;
  GreedyResult plain = GreedyPlan(graph, SaveAll(graph), greedy);
  CHECK_FALSE(plain.fits);  // stalls at 312.1 MiB: no single drop lowers it
  PlannerOptions options;
  options.budget_bytes = 300 * kMiB;
  PlannerResult plan = PlanGraph(graph, options);
  CHECK(plan.fits);
  CHECK(plan.peak <= 300 * kMiB);
  SimResult sim = Simulate(graph, plan.keep, {});
  CHECK(sim.peak_bytes == plan.peak);
  CHECK(sim.recompute_cost == plan.recompute_cost);
}

TEST_CASE("planner: the default plan fits wherever a baseline fits, and costs no more") {
  std::vector<Graph> graphs;
  graphs.push_back(TransformerBlock());
  UNetOptions unet;
  unet.levels = 4;
  graphs.push_back(UNetGraph(unet));
  for (const Graph& graph : graphs) {
    const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
    for (int percent = 50; percent <= 100; percent += 10) {
      PlannerOptions options;
      options.budget_bytes = save_all * percent / 100;
      PlannerResult ours = PlanGraph(graph, options);
      for (Strategy s : AllStrategies()) {
        options.strategy = s;
        PlannerResult other = PlanGraph(graph, options);
        CAPTURE(graph.source);
        CAPTURE(percent);
        CAPTURE(ToString(s));
        if (other.fits) {
          CHECK(ours.fits);
          CHECK(ours.recompute_cost <= other.recompute_cost);
        }
      }
    }
  }
}

TEST_CASE("planner: start sets") {
  Graph graph = TransformerBlock();
  CHECK(StartSet(graph, "save-all", DefaultRecomputePolicy()) == SaveAll(graph));
  SaveSet mincut = StartSet(graph, "mincut", DefaultRecomputePolicy());
  CHECK(mincut != SaveAll(graph));  // some candidates come from cheap ops (norms, gelu)
  CHECK_THROWS_AS(StartSet(graph, "random", DefaultRecomputePolicy()), InputError);
}

int RunCli(const std::string& args, std::string* err) {
  std::string command = std::string(CKPTPLAN_BINARY) + " " + args + " 2>&1 >/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n;
  err->clear();
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) err->append(buffer, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("planner: CLI strategies, starts and the infeasible message") {
  const std::string graph =
      std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/transformer_block.json";
  std::string err;
  CHECK(RunCli("plan " + graph + " --budget 300MiB", &err) == kExitOk);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --strategy greedy --start save-all", &err) ==
        kExitInfeasible);
  CHECK(err.find("lowest peak reached is 312.1 MiB") != std::string::npos);
  CHECK(err.find("lower bound 280.1 MiB") != std::string::npos);
  CHECK(RunCli("plan " + graph + " --budget 320MiB --strategy greedy --start mincut", &err) ==
        kExitOk);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --start nowhere", &err) == kExitUsage);
  CHECK(err.find("--start: unknown start set 'nowhere'") != std::string::npos);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --recomputable-ops 'bad op'", &err) ==
        kExitUsage);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --policy /nonexistent/policy.txt", &err) ==
        kExitIo);
}

}  // namespace
}  // namespace ckptplan
