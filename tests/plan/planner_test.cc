#include "ckptplan/plan/planner.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/ir/synth.h"
#include "cli_util.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

constexpr int64_t kMiB = 1 << 20;

Graph TransformerBlock() {
  return LoadGraph(std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/transformer_block.json", {})
      .graph;
}

// A plan's peak and cost, as the planner reports them (after cleanup, from
// its regional simulations), are those of a whole-step simulation.
void CheckFigures(const Graph& graph, const PlannerResult& plan) {
  const SimResult sim = Simulate(graph, plan.keep, {});
  CHECK(sim.peak_bytes == plan.peak);
  CHECK(sim.recompute_cost == plan.recompute_cost);
}

TEST_CASE("planner: reaches 300 MiB on the transformer block where the greedy stalls") {
  Graph graph = TransformerBlock();
  // With its dropouts recomputable (renamed: as if their random state were
  // replayed), the greedy drops their outputs first and then stalls.
  for (Node& node : graph.nodes) {
    if (node.op == "dropout") node.op = "replayed_mask";
  }
  GreedyOptions greedy;
  greedy.budget_bytes = 300 * kMiB;
  GreedyResult plain = GreedyPlan(graph, SaveAll(graph), greedy);
  CHECK_FALSE(plain.fits);  // stalls at 312.1 MiB: no single drop lowers it
  PlannerOptions options;
  options.budget_bytes = 300 * kMiB;
  PlannerResult plan = PlanGraph(graph, options);
  CHECK(plan.fits);
  CHECK(plan.peak <= 300 * kMiB);
  CheckFigures(graph, plan);
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
      CheckFigures(graph, ours);
      for (Strategy s : AllStrategies()) {
        options.strategy = s;
        PlannerResult other = PlanGraph(graph, options);
        CAPTURE(graph.source);
        CAPTURE(percent);
        CAPTURE(ToString(s));
        CheckFigures(graph, other);
        if (other.fits) {
          CHECK(ours.fits);
          CHECK(ours.recompute_cost <= other.recompute_cost);
        }
      }
    }
  }
}

TEST_CASE("planner: plans do not depend on pruning, and verify mode checks every shortcut") {
  // Pruning off simulates every drop and re-save the greedy, cleanup and
  // local search would answer without simulating; verify mode simulates them
  // besides and throws on a shortcut the simulation does not bear out.
  std::vector<Graph> graphs;
  graphs.push_back(TransformerBlock());
  TransformerOptions transformer;
  transformer.layers = 3;
  transformer.seq = 64;
  transformer.vocab = 1000;
  graphs.push_back(TransformerGraph(transformer));
  UNetOptions unet;
  unet.levels = 3;
  graphs.push_back(UNetGraph(unet));
  for (const Graph& graph : graphs) {
    const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
    for (int percent : {50, 70, 90}) {
      CAPTURE(graph.source);
      CAPTURE(percent);
      PlannerOptions options;
      options.budget_bytes = save_all * percent / 100;
      const PlannerResult pruned = PlanGraph(graph, options);
      options.prune = false;
      const PlannerResult simulated = PlanGraph(graph, options);
      options.prune = true;
      options.verify = true;
      PlannerResult verified;
      CHECK_NOTHROW(verified = PlanGraph(graph, options));
      CHECK(pruned.keep == simulated.keep);
      CHECK(pruned.keep == verified.keep);
      CHECK(pruned.peak == simulated.peak);
      CHECK(pruned.recompute_cost == simulated.recompute_cost);
    }
  }
}

// Plans `graph` at `percent` of its save-all peak in verify mode (which
// throws where a shortcut's bound fails) and checks the plan is the one
// made without pruning.
void CheckVerifiedPlanUnpruned(const Graph& graph, int64_t save_all, int percent) {
  CAPTURE(graph.source);
  CAPTURE(percent);
  PlannerOptions options;
  options.budget_bytes = save_all * percent / 100;
  options.verify = true;
  PlannerResult verified;
  CHECK_NOTHROW(verified = PlanGraph(graph, options));
  options.verify = false;
  options.prune = false;
  const PlannerResult simulated = PlanGraph(graph, options);
  CHECK(verified.keep == simulated.keep);
  CHECK(verified.method == simulated.method);
}

TEST_CASE("planner: segment plans left out by their floors and costs lose") {
  // The default search simulates only the segment plans that may be chosen
  // (a floor under each peak, PeakFloor; recompute costs once one fits).
  // Verify mode simulates every plan left out and throws unless it loses
  // to the chosen one outright; the plan equals the one without pruning.
  // Random graphs and small transformers at budgets 30% to 95% of save-all
  // (skipping the cheaper plans after the first fit fails here: "3 segments
  // was left out ... but does not lose to 4 segments").
  std::vector<Graph> graphs;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 4 + static_cast<int>(seed % 8);
    random.width = 1 + static_cast<int>(seed % 4);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    graphs.push_back(RandomTrainingGraph(random));
  }
  for (int layers : {1, 2, 3, 4}) graphs.push_back(testing::SmallTransformer(1, layers));
  for (const Graph& graph : graphs) {
    const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
    for (int percent = 30; percent <= 95; percent += 5) {
      CheckVerifiedPlanUnpruned(graph, save_all, percent);
    }
  }
}

// How many lines of `text` hold `needle`.
size_t CountLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  size_t count = 0;
  for (std::string line; std::getline(in, line);) count += line.find(needle) != std::string::npos;
  return count;
}

// The debug log while it lives (the default logger, put back after).
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_st>(log_));
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return log_.str(); }

 private:
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Plans `graph`, one region, at `percent` of its save-all peak in verify
// mode and without pruning (CheckVerifiedPlanUnpruned), then plainly: the
// plain run's plan, and what the three logged in *text.
PlannerResult PlanOneRegionThreeWays(const Graph& graph, int percent, std::string* text) {
  REQUIRE(SimContext(graph).regions().size() == 1);
  const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
  const CapturedLog log;
  CheckVerifiedPlanUnpruned(graph, save_all, percent);
  PlannerOptions options;
  options.budget_bytes = save_all * percent / 100;
  const PlannerResult planned = PlanGraph(graph, options);
  *text = log.text();
  return planned;
}

TEST_CASE("planner: baselines left raw, as cleaned up they cannot win, lose") {
  // Where a greedy's plan fits, a fitting baseline's cleanup stops once no
  // fitting plan that saves what it saves by then may cost less than the
  // best (PeakFloor::CostOfFitting), read before its first re-save and then
  // as NextFloorReading says. Verify mode cleans those baselines up whole and throws
  // unless each loses to the best; the plans equal those without pruning. Graphs of more than 64 candidates (where local search starts
  // from the best plan alone): small transformers and random graphs.
  std::vector<Graph> graphs;
  for (int layers : {3, 4, 6}) {
    TransformerOptions transformer;
    transformer.layers = layers;
    transformer.seq = 128;
    transformer.vocab = 1000;
    graphs.push_back(TransformerGraph(transformer));
  }
  for (uint64_t seed = 2; seed <= 5; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 36 + 6 * static_cast<int>(seed);
    random.width = 3;
    graphs.push_back(RandomTrainingGraph(random));
  }
  const CapturedLog log;
  size_t plans = 0;
  for (const Graph& graph : graphs) {
    REQUIRE(SimContext(graph).candidates.size() > 64);
    const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
    for (int percent = 40; percent <= 95; percent += 5) {
      CheckVerifiedPlanUnpruned(graph, save_all, percent);
      ++plans;
    }
  }
  const std::string text = log.text();
  const size_t stopped = CountLines(text, "cleanup stopped after");
  const size_t at_start = CountLines(text, "cleanup stopped after 0 re-saves");
  MESSAGE(stopped << " baseline cleanups stopped in " << plans << " plans, " << at_start
                  << " of them before a re-save");
  CHECK(at_start > 20);
  CHECK(stopped - at_start > 5);
}

TEST_CASE("planner: baselines that cost more than a fitting greedy's plan, left raw, are not "
          "simulated") {
  // A 24-layer transformer (3,470 nodes, one region) at 80% of save-all:
  // the greedy's plan fits at cost 34,728,837,120. Scope-checkpoint,
  // sqrt-segments and knapsack drop so many candidates that their cleanups
  // (dropped x 3,470 node-steps each) are over the 1,000,000 budget: they
  // would join raw, and each costs more than the greedy's plan, so it cannot
  // win whatever its peak, and is not simulated. Verify mode simulates each,
  // throws unless it loses, and adds it all the same: the plan must be the
  // one made with them left out.
  TransformerOptions deep;
  deep.layers = 24;
  const Graph graph = TransformerGraph(deep);
  REQUIRE(graph.nodes.size() == 3470);
  const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
  const CapturedLog log;
  PlannerOptions options;
  options.budget_bytes = save_all * 80 / 100;
  const PlannerResult planned = PlanGraph(graph, options);
  CHECK(planned.method == "greedy from mincut + cleanup");
  CHECK(planned.recompute_cost == 34728837120.0);
  options.verify = true;
  PlannerResult verified;
  CHECK_NOTHROW(verified = PlanGraph(graph, options));
  CHECK(verified.keep == planned.keep);
  CHECK(verified.method == planned.method);
  const std::string text = log.text();
  // In the plain run and in verify mode.
  for (const char* baseline : {"scope-checkpoint", "sqrt-segments", "knapsack"}) {
    CAPTURE(baseline);
    CHECK(CountLines(text, std::string(baseline) +
                               ": costs more than greedy from mincut + cleanup (34728837120), "
                               "which fits, and is not cleaned up: not simulated") == 2);
  }
  CHECK(CountLines(text, "not simulated") == 6);
}

TEST_CASE("planner: where no greedy's plan fits, the baselines' cleanups run best first") {
  // GPT-2-small-shaped, batch 8, seq 256, one region. At 70% of save-all
  // the greedy stalls over the budget (2,431,187,972 > 2,430,983,494 bytes),
  // so both fitting baselines are cleaned up. Added one by one, the first
  // (15 segments, which cleans up to cost 169,743,482,880) ran whole:
  // nothing fit before it. The baselines' cleanups now run from the lowest
  // cost floor up; scope-checkpoint's ends at 144,832,462,848, and the floor
  // of 15 segments' is over that before its first re-save, so it is
  // stopped. Verify mode cleans it up whole and throws unless it loses;
  // the plan and its name equal those without pruning (every cleanup whole,
  // in the order added).
  TransformerOptions gpt2;
  gpt2.seq = 256;
  std::string text;
  const PlannerResult planned = PlanOneRegionThreeWays(TransformerGraph(gpt2), 70, &text);
  CHECK(CountLines(text, "15 segments: cleanup estimated at 360594 node-steps (budget 1000000, "
                         "no greedy's plan fits)") == 3);
  // Stopped in verify mode (which then cleans it up whole) and in the plain
  // run, not without pruning.
  CHECK(CountLines(text, "15 segments: cleanup stopped after 0 re-saves: it cannot beat "
                         "scope-checkpoint + cleanup") == 2);
  CHECK(CountLines(text, "15 segments + cleanup: peak 2430811164 bytes, cost 169743482880") == 1);
  CHECK(planned.method == "scope-checkpoint + cleanup");
  CHECK(planned.recompute_cost == 144832462848.0);
}

TEST_CASE("planner: when a baseline's cleanup reads its cost floor next") {
  // No reading before: after 0, 1, 2 and 100 re-saves, twice as many (at
  // least 1).
  CHECK(NextFloorReading(0, 5.0, std::nullopt, 10.0) == 1);
  CHECK(NextFloorReading(1, 5.0, std::nullopt, 10.0) == 2);
  CHECK(NextFloorReading(2, 5.0, std::nullopt, 10.0) == 4);
  CHECK(NextFloorReading(100, 5.0, std::nullopt, 10.0) == 200);
  // 1,000 after 64 re-saves, 1,640 after 128: 640 / 64 = 10 a re-save, so
  // 2,000 is reached (360 / 10 =) 36 re-saves on, at 164 (before 256).
  CHECK(NextFloorReading(128, 1640.0, std::make_pair(size_t{64}, 1000.0), 2000.0) == 164);
  // 1 a re-save (1,064 after 128): 936 more re-saves, past 256: doubled.
  CHECK(NextFloorReading(128, 1064.0, std::make_pair(size_t{64}, 1000.0), 2000.0) == 256);
  // A flat floor says nothing: doubled.
  CHECK(NextFloorReading(128, 1000.0, std::make_pair(size_t{64}, 1000.0), 2000.0) == 256);
  // 1,990 after 128 (990 / 64 = 15.5 a re-save) would reach 2,000 in one:
  // not sooner than 128 + 128 / 16 = 136.
  CHECK(NextFloorReading(128, 1990.0, std::make_pair(size_t{64}, 1000.0), 2000.0) == 136);
  // After 1 re-save, at least one more (1 / 16 rounds down to 0).
  CHECK(NextFloorReading(1, 1999.0, std::make_pair(size_t{0}, 1000.0), 2000.0) == 2);
}

TEST_CASE("planner: a baseline's cleanup stopped between doublings loses as a whole one does") {
  // The 4-layer transformer (`ckptplan generate transformer --layers 4`,
  // 590 nodes, save-all peak 5,921,668,108 bytes) at 90% of save-all: the
  // greedy's plan fits, and sqrt-segments' cleanup is stopped once the
  // floor under its cost passes that plan's. Read after 1, 2, 4, 8 and 16
  // re-saves, the floor's rise says when: after 22 (doubling alone read it
  // next after 32). Verify mode cleans the stopped cleanup up whole and
  // throws unless it loses; the plan is the one without pruning (every
  // cleanup whole), and the plain run's.
  TransformerOptions options;
  options.layers = 4;
  const Graph graph = TransformerGraph(options);
  REQUIRE(Simulate(graph, SaveAll(graph), {}).peak_bytes == 5921668108);
  std::string text;
  const PlannerResult planned = PlanOneRegionThreeWays(graph, 90, &text);
  CHECK(planned.method == "greedy from save-all + cleanup + local search + cleanup");
  CHECK(planned.recompute_cost == 698351616.0);
  // In verify mode and in the plain run.
  CHECK(CountLines(text, "sqrt-segments: cleanup stopped after 22 re-saves: it cannot "
                         "beat greedy from save-all + cleanup") == 2);
}

TEST_CASE("planner: start sets") {
  Graph graph = TransformerBlock();
  CHECK(StartSet(graph, "save-all", DefaultRecomputePolicy()) == SaveAll(graph));
  SaveSet mincut = StartSet(graph, "mincut", DefaultRecomputePolicy());
  CHECK(mincut != SaveAll(graph));  // some candidates come from cheap ops (norms, gelu)
  CHECK_THROWS_AS(StartSet(graph, "random", DefaultRecomputePolicy()), InputError);
}

// An attention's softmax and a view of it, both read by the backward, as an
// exported GPT-2 has them: s = softmax(a), e = expand(s) and r = view(e)
// share s's storage (400 B); mm reads r, and their backward nodes read r
// (mm_bwd) and s (sm_bwd). Candidates: s, r and the loss l. Save-all's peak
// is at loss: x 10 + s 400 + o 50 + l 1 = 461 B.
using testing::GraphBuilder;
using testing::Id;

Graph SavedViewGraph() {
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  return GraphBuilder()
      .Tensor("x", 10, TensorKind::kInput)
      .Tensor("a", 10)
      .Tensor("s", 400)
      .Tensor("e", 400, TensorKind::kActivation, "s")
      .Tensor("r", 400, TensorKind::kActivation, "e")
      .Tensor("o", 50).Tensor("l", 1).Tensor("dl", 4).Tensor("dr", 4).Tensor("de", 4)
      .Tensor("ds", 4).Tensor("da", 4)
      .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
      .Node("sm", "softmax", kF, {"a"}, {"s"}, 5)
      .Node("ex", "expand", kF, {"s"}, {"e"}, 0)
      .Node("rv", "view", kF, {"e"}, {"r"}, 0)
      .Node("mm", "mm", kF, {"r"}, {"o"}, 2)
      .Node("loss", "sum", kF, {"o"}, {"l"}, 1)
      .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
      .Node("mm_bwd", "mm_bwd", kB, {"dl", "r"}, {"dr"}, 1)
      .Node("rv_bwd", "view_bwd", kB, {"dr"}, {"de"}, 1)
      .Node("ex_bwd", "expand_bwd", kB, {"de"}, {"ds"}, 1)
      .Node("sm_bwd", "softmax_bwd", kB, {"ds", "s"}, {"da"}, 1)
      .Node("fa_bwd", "relu_bwd", kB, {"da", "x"}, {}, 1)
      .Build();
}

TEST_CASE("planner: a saved view of a saved candidate's storage is dropped from the start") {
  const Graph graph = SavedViewGraph();
  const SimContext context(graph);
  const TensorId s = Id(graph, "s"), r = Id(graph, "r"), l = Id(graph, "l");
  REQUIRE(context.candidates == std::vector<TensorId>{s, r, l});
  const SaveSet all = SaveAll(graph);
  // r re-runs ex and rv from s, both views of s's storage: dropped.
  SaveSet expected = all;
  expected[r] = 0;
  const SaveSet views = DropSavedViews(context, all);
  CHECK(views == expected);
  // It frees nothing and costs the views' 0 + 0 flops: loss's step still
  // holds x 10 + s 400 + o 50 + l 1 = 461 B.
  const SimResult before = Simulate(graph, all, {});
  const SimResult after = Simulate(graph, views, {});
  CHECK(before.peak_bytes == 461);
  CHECK(after.peak_bytes == 461);
  CHECK(after.recompute_cost == 0);
  // With s dropped, r holds the storage alone: its recompute re-runs sm,
  // which makes the storage, so it stays.
  SaveSet no_root = all;
  no_root[s] = 0;
  CHECK(DropSavedViews(context, no_root) == no_root);
  // s is the storage's own tensor and l no view: nothing else goes.
  CHECK(DropSavedViews(context, expected) == expected);
}

TEST_CASE("planner: the greedy frees a storage that a saved view and its saved root share") {
  const Graph graph = SavedViewGraph();
  const TensorId s = Id(graph, "s"), r = Id(graph, "r"), l = Id(graph, "l");
  // Budget 460 B, one under save-all's 461. Dropping s alone leaves its
  // storage to r until mm_bwd (loss still 461), dropping r alone frees
  // nothing, and l is made at loss's own step: from save-all, no single drop
  // lowers the peak, so the plain greedy stops.
  GreedyOptions greedy;
  greedy.budget_bytes = 460;
  const GreedyResult plain = GreedyPlan(graph, SaveAll(graph), greedy);
  CHECK_FALSE(plain.fits);
  CHECK(plain.drops.empty());
  // The planner's greedy starts with r dropped, so dropping s frees the
  // storage after mm: loss holds x 10 + o 50 + l 1 = 61 B, and the peak is
  // mm's x 10 + s 400 + o 50 = 460 B. mm_bwd's chain re-runs fa and sm
  // (cost 1 + 5 = 6) and the views (0).
  PlannerOptions options;
  options.budget_bytes = 460;
  options.strategy = Strategy::kGreedy;
  options.start = "save-all";
  for (bool reference : {false, true}) {
    CAPTURE(reference);
    options.reference_greedy = reference;
    const PlannerResult plan = PlanGraph(graph, options);
    CHECK(plan.fits);
    CHECK(plan.peak == 460);
    CHECK(plan.recompute_cost == 6);
    CHECK(plan.keep[s] == 0);
    CHECK(plan.keep[r] == 0);
    CHECK(plan.keep[l] == 1);
    CheckFigures(graph, plan);
  }
}

TEST_CASE("planner: the extra greedy runs only where a greedy is cheap") {
  // One deep region: `generate transformer --layers 69`, the benchmark's 10^4-node graph.
  TransformerOptions deep;
  deep.layers = 69;
  const Graph deep_graph = TransformerGraph(deep);
  const SimContext deep_context(deep_graph);
  REQUIRE(deep_context.regions().size() == 1);
  // 1,662 candidates x 9,950 nodes in its one region = 16,536,900 > 10^7, so neither the
  // second start nor the lowest-peak segment plan gets a greedy.
  CHECK(deep_context.candidates.size() * deep_graph.nodes.size() > 10'000'000u);
  CHECK_FALSE(RunsExtraGreedies(deep_context));
  // 23 microbatches of 3 layers: 1,794 candidates (<= 10,000) and regions of a few hundred
  // nodes, under the 5,574 that 1,794 x nodes <= 10^7 allows, so both extra greedies run.
  TransformerOptions micro;
  micro.layers = 3;
  micro.microbatches = 23;
  const Graph micro_graph = TransformerGraph(micro);
  const SimContext micro_context(micro_graph);
  CHECK(micro_context.regions().size() >= 23);
  CHECK(micro_context.candidates.size() <= 10'000u);
  CHECK(RunsExtraGreedies(micro_context));
  // A small graph: both run.
  const Graph block = TransformerBlock();
  CHECK(RunsExtraGreedies(SimContext(block)));
}

TEST_CASE("planner: CLI strategies, starts and the infeasible message") {
  using testing::RunCli;
  const std::string graph = "sample_graphs/transformer_block.json";
  testing::CliResult run = RunCli("plan " + graph + " --budget 300MiB");
  CHECK(run.code == kExitOk);
  CHECK(run.out.find("peak, planned       296.1 MiB") != std::string::npos);
  run = RunCli("plan " + graph + " --budget 290MiB --strategy greedy --start save-all");
  CHECK(run.code == kExitInfeasible);
  CHECK(run.err.find("lowest peak reached is 296.1 MiB") != std::string::npos);
  CHECK(run.err.find("lower bound 280.1 MiB") != std::string::npos);
  CHECK(RunCli("plan " + graph + " --budget 320MiB --strategy greedy --start mincut").code ==
        kExitOk);
  run = RunCli("plan " + graph + " --budget 300MiB --start nowhere");
  CHECK(run.code == kExitUsage);
  CHECK(run.err.find("--start: unknown start set 'nowhere'") != std::string::npos);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --recomputable-ops 'bad op'").code ==
        kExitUsage);
  CHECK(RunCli("plan " + graph + " --budget 300MiB --policy /nonexistent/policy.txt").code ==
        kExitIo);
  // A policy file that allows everything the block runs: the min-cut start
  // then recomputes more, and the plan still fits.
  const std::string dir = testing::ScratchDir("planner_policy");
  { std::ofstream(dir + "/policy.txt") << "+default\nmatmul  # allow\nbmm\ndropout\n"; }
  CHECK(RunCli("plan " + graph + " --budget 300MiB --policy " + dir + "/policy.txt").code ==
        kExitOk);
}

}  // namespace
}  // namespace ckptplan
