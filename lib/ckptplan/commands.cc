#include "ckptplan/commands.h"

#include <spdlog/spdlog.h>

#include "ckptplan/errors.h"
#include "ckptplan/output_file.h"
#include "ckptplan/plan_io.h"
#include "ckptplan/planner.h"
#include "ckptplan/report.h"
#include "ckptplan/simulator.h"
#include "ckptplan/size.h"
#include "ckptplan/sweep.h"

namespace ckptplan {
namespace {

SimResult SimulateRecorded(const Graph& graph, const SaveSet& keep, int64_t reserve) {
  SimOptions options;
  options.reserve_bytes = reserve;
  options.record_categories = true;
  return Simulate(graph, keep, options);
}

void PrintSummary(const Graph& graph, const Summary& summary, bool json, std::ostream& out) {
  if (json) {
    out << SummaryJson(graph, summary).dump(2) << '\n';
  } else {
    out << SummaryText(graph, summary);
  }
}

PlannerOptions MakePlannerOptions(const SearchFlags& flags, int64_t reserve_bytes) {
  PlannerOptions options;
  options.reserve_bytes = reserve_bytes;
  if (!ParseStrategy(flags.strategy, &options.strategy)) {
    std::string names;
    for (Strategy s : AllStrategies()) names += (names.empty() ? "" : ", ") + std::string(ToString(s));
    throw InputError("--strategy: unknown strategy '" + flags.strategy + "' (expected one of " +
                         names + ")",
                     kExitUsage);
  }
  if (flags.start != "mincut" && flags.start != "save-all") {
    throw InputError("--start: unknown start set '" + flags.start +
                         "' (expected mincut or save-all)",
                     kExitUsage);
  }
  options.start = flags.start;
  options.policy = MakeRecomputePolicy(flags.policy_path, flags.recomputable_ops);
  return options;
}

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out) {
  if (options.budget_bytes < 0) throw InputError("plan: --budget is required", kExitUsage);
  PlannerOptions planner_options = MakePlannerOptions(options, options.reserve_bytes);
  planner_options.budget_bytes = options.budget_bytes;
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  const Graph& graph = loaded.graph;
  LowerBound bound = ComputeLowerBound(graph, options.reserve_bytes);
  PlannerResult greedy = PlanGraph(graph, planner_options);

  SimResult save_all = SimulateRecorded(graph, SaveAll(graph), options.reserve_bytes);
  SimResult planned = SimulateRecorded(graph, greedy.keep, options.reserve_bytes);
  if (!greedy.fits) {
    std::string why = options.budget_bytes < bound.bytes
                          ? "no plan can fit: the lower bound is " + FormatBytes(bound.bytes) +
                                " = " + DescribeLowerBound(graph, bound) + " > budget " +
                                FormatBytes(options.budget_bytes)
                          : "the lowest peak reached is " + FormatBytes(planned.peak_bytes) +
                                " > budget " + FormatBytes(options.budget_bytes) +
                                " (lower bound " + FormatBytes(bound.bytes) + " = " +
                                DescribeLowerBound(graph, bound) + ")";
    throw InfeasibleError(options.graph_path + ": " + why);
  }
  spdlog::info("plan: {}", greedy.method);
  Summary summary{"plan", options.graph_path, options.budget_bytes, options.reserve_bytes,
                  &save_all, &planned, &greedy.keep, bound, options.top};
  // Render everything before writing anything, so a failure leaves no files.
  std::string plan_text, timeline_text;
  if (!options.output_path.empty()) {
    PlanRecord record{options.graph_path, loaded.sha256, options.budget_bytes,
                      options.reserve_bytes, options.start, &save_all, &planned, &greedy.keep,
                      bound};
    plan_text = PlanToJson(graph, record).dump(2) + "\n";
  }
  if (!options.timeline_path.empty()) timeline_text = TimelineJson(graph, planned).dump(2) + "\n";
  if (!plan_text.empty()) WriteFileAtomic(options.output_path, plan_text);
  if (!timeline_text.empty()) WriteFileAtomic(options.timeline_path, timeline_text);
  PrintSummary(graph, summary, options.json, out);
  return kExitOk;
}

int RunSimulate(const SimulateOptions& options, std::ostream& out) {
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  const Graph& graph = loaded.graph;
  SaveSet keep = SaveAll(graph);
  int64_t reserve = options.reserve_bytes;
  int64_t budget = -1;
  if (!options.plan_path.empty()) {
    LoadedPlan plan = ReadPlan(graph, options.plan_path);
    if (!plan.graph_sha256.empty() && plan.graph_sha256 != loaded.sha256) {
      spdlog::warn("{}: plan was made for a graph with a different digest than {}",
                   options.plan_path, options.graph_path);
    }
    keep = std::move(plan.keep);
    budget = plan.budget_bytes;
    if (reserve == 0) reserve = plan.reserve_bytes;
  }
  SimResult save_all = SimulateRecorded(graph, SaveAll(graph), reserve);
  SimResult simulated = SimulateRecorded(graph, keep, reserve);
  Summary summary{"simulate", options.graph_path, budget, reserve, &save_all, &simulated,
                  &keep, ComputeLowerBound(graph, reserve), options.top,
                  !options.plan_path.empty()};
  if (!options.timeline_path.empty()) {
    WriteFileAtomic(options.timeline_path, TimelineJson(graph, simulated).dump(2) + "\n");
  }
  PrintSummary(graph, summary, options.json, out);
  return kExitOk;
}

int RunSweep(const SweepOptions& options, std::ostream& out) {
  if (options.budgets.empty()) {
    throw InputError("sweep: give --from, --to and --steps, or --budgets", kExitUsage);
  }
  PlannerOptions planner_options = MakePlannerOptions(options, options.reserve_bytes);
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  SweepResult sweep = RunSweep(loaded.graph, options.budgets, planner_options);
  if (options.json) {
    out << SweepJson(loaded.graph, options.graph_path, sweep).dump(2) << '\n';
  } else {
    out << SweepText(loaded.graph, options.graph_path, sweep);
  }
  return kExitOk;
}

}  // namespace ckptplan
