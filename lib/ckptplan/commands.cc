#include "ckptplan/commands.h"

#include <spdlog/spdlog.h>

#include "ckptplan/errors.h"
#include "ckptplan/export.h"
#include "ckptplan/json_loader.h"
#include "ckptplan/limits.h"
#include "ckptplan/output_file.h"
#include "ckptplan/plan_io.h"
#include "ckptplan/planner.h"
#include "ckptplan/report.h"
#include "ckptplan/report_html.h"
#include "ckptplan/simulator.h"
#include "ckptplan/size.h"
#include "ckptplan/sweep.h"
#include "ckptplan/trace.h"

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

struct OutputFile {
  std::string path;
  std::string text;
};

// Renders the --report, --trace and --timeline-csv files the options ask for.
void RenderReports(const Graph& graph, const CommonOptions& options, const Summary& summary,
                   std::vector<OutputFile>* files) {
  // Without a plan the simulated run is save-all: one chart, not two.
  const SimResult* planned = summary.has_plan ? summary.planned : summary.save_all;
  if (!options.report_path.empty()) {
    HtmlReportInput input;
    input.command = summary.command;
    input.graph_path = summary.graph_path;
    input.budget_bytes = summary.budget_bytes;
    input.reserve_bytes = summary.reserve_bytes;
    input.save_all = summary.save_all;
    input.planned = planned;
    input.keep = summary.keep;
    input.top = summary.top;
    files->push_back({options.report_path, RenderHtmlReport(graph, input)});
  }
  if (!options.trace_path.empty()) {
    std::string label = !summary.has_plan ? "save-all" : summary.command == "plan" ? "planned"
                                                                                 : "simulated";
    files->push_back({options.trace_path, TraceJson(graph, *planned, label)});
  }
  if (!options.timeline_csv_path.empty()) {
    files->push_back({options.timeline_csv_path, TimelineCsv(graph, *planned)});
  }
}

// The graph file a plan names, for `export` without --graph.
std::string PlanGraphFile(const std::string& plan_path) {
  const std::string text = ReadFile(plan_path);
  CheckJsonDepth(text, Limits().max_depth, plan_path);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(plan_path + ": malformed JSON at byte " + std::to_string(e.byte) + ": " +
                     e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw InputError(plan_path + ": malformed JSON: " + e.what());
  }
  if (root.is_object() && root.contains("graph") && root["graph"].is_object() &&
      root["graph"].contains("file") && root["graph"]["file"].is_string()) {
    return root["graph"]["file"].get<std::string>();
  }
  throw InputError(plan_path + ": names no graph file (\"graph\": {\"file\": ...}); pass --graph",
                   kExitUsage);
}

}  // namespace

PlanOutcome ComputePlan(const Graph& graph, const PlannerOptions& options) {
  PlanOutcome outcome;
  outcome.bound = ComputeLowerBound(graph, options.reserve_bytes);
  outcome.found = PlanGraph(graph, options);
  outcome.save_all = SimulateRecorded(graph, SaveAll(graph), options.reserve_bytes);
  outcome.planned = SimulateRecorded(graph, outcome.found.keep, options.reserve_bytes);
  if (outcome.found.fits) return outcome;
  const LowerBound& bound = outcome.bound;
  const int64_t budget_bytes = options.budget_bytes;
  outcome.infeasible =
      budget_bytes < bound.bytes
          ? "no plan can fit: the lower bound is " + FormatBytes(bound.bytes) + " = " +
                DescribeLowerBound(graph, bound) + " > budget " + FormatBytes(budget_bytes)
          : "the lowest peak reached is " + FormatBytes(outcome.planned.peak_bytes) +
                " > budget " + FormatBytes(budget_bytes) + " (lower bound " +
                FormatBytes(bound.bytes) + " = " + DescribeLowerBound(graph, bound) + ")";
  return outcome;
}

int RunPlan(const PlanOptions& options, std::ostream& out) {
  if (options.budget_bytes < 0) throw InputError("plan: --budget is required", kExitUsage);
  CheckReserve(options.reserve_bytes, "--reserve");
  PlannerOptions planner_options = MakePlannerOptions(options, options.reserve_bytes);
  planner_options.budget_bytes = options.budget_bytes;
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  const Graph& graph = loaded.graph;
  PlanOutcome outcome = ComputePlan(graph, planner_options);
  if (!outcome.found.fits) throw InfeasibleError(options.graph_path + ": " + outcome.infeasible);
  spdlog::info("plan: {}", outcome.found.method);
  const SimResult& save_all = outcome.save_all;
  const SimResult& planned = outcome.planned;
  const PlannerResult& found = outcome.found;
  const LowerBound& bound = outcome.bound;
  Summary summary{"plan", options.graph_path, options.budget_bytes, options.reserve_bytes,
                  &save_all, &planned, &found.keep, bound, options.top};
  // Render everything before writing anything, so a failure leaves no files.
  std::string plan_text, timeline_text;
  if (!options.output_path.empty()) {
    PlanRecord record{options.graph_path, loaded.sha256, options.budget_bytes,
                      options.reserve_bytes, options.start, &save_all, &planned, &found.keep,
                      bound};
    plan_text = PlanToJson(graph, record).dump(2) + "\n";
  }
  if (!options.timeline_path.empty()) timeline_text = TimelineJson(graph, planned).dump(2) + "\n";
  std::vector<OutputFile> reports;
  RenderReports(graph, options, summary, &reports);
  if (!plan_text.empty()) WriteFileAtomic(options.output_path, plan_text);
  if (!timeline_text.empty()) WriteFileAtomic(options.timeline_path, timeline_text);
  for (const OutputFile& file : reports) WriteFileAtomic(file.path, file.text);
  PrintSummary(graph, summary, options.json, out);
  return kExitOk;
}

int RunSimulate(const SimulateOptions& options, std::ostream& out) {
  CheckReserve(options.reserve_bytes, "--reserve");
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
  std::vector<OutputFile> reports;
  if (!options.timeline_path.empty()) {
    reports.push_back({options.timeline_path, TimelineJson(graph, simulated).dump(2) + "\n"});
  }
  RenderReports(graph, options, summary, &reports);
  for (const OutputFile& file : reports) WriteFileAtomic(file.path, file.text);
  PrintSummary(graph, summary, options.json, out);
  return kExitOk;
}

int RunSweep(const SweepOptions& options, std::ostream& out) {
  CheckReserve(options.reserve_bytes, "--reserve");
  if (options.budgets.empty()) {
    throw InputError("sweep: give --from, --to and --steps, or --budgets", kExitUsage);
  }
  if (!options.timeline_path.empty() || !options.trace_path.empty() ||
      !options.timeline_csv_path.empty()) {
    throw InputError("sweep: --timeline, --trace and --timeline-csv describe one plan; use them "
                     "with `plan` (sweep takes --report)",
                     kExitUsage);
  }
  PlannerOptions planner_options = MakePlannerOptions(options, options.reserve_bytes);
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  SweepResult sweep = RunSweep(loaded.graph, options.budgets, planner_options);
  if (!options.report_path.empty()) {
    HtmlReportInput input;
    input.command = "sweep";
    input.graph_path = options.graph_path;
    input.reserve_bytes = options.reserve_bytes;
    for (const SweepRow& row : sweep.rows) {
      input.sweep.push_back({row.budget_bytes, row.peak_bytes, row.recompute_cost, row.feasible});
    }
    WriteFileAtomic(options.report_path, RenderHtmlReport(loaded.graph, input));
  }
  if (options.json) {
    out << SweepJson(loaded.graph, options.graph_path, sweep).dump(2) << '\n';
  } else {
    out << SweepText(loaded.graph, options.graph_path, sweep);
  }
  return kExitOk;
}

int RunExport(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  ExportTarget target;
  if (!ParseExportTarget(options.target, &target)) {
    throw InputError("--to: unknown target '" + options.target +
                         "' (expected pytorch-sac, jax, megatron, torchtitan or deepspeed)",
                     kExitUsage);
  }
  std::string graph_path =
      options.graph_path.empty() ? PlanGraphFile(options.plan_path) : options.graph_path;
  LoadedGraph loaded = LoadGraph(graph_path, options.load);
  LoadedPlan plan = ReadPlan(loaded.graph, options.plan_path);
  if (!plan.graph_sha256.empty() && plan.graph_sha256 != loaded.sha256) {
    spdlog::warn("{}: plan was made for a graph with a different digest than {}",
                 options.plan_path, graph_path);
  }
  ExportInput input{options.plan_path, std::move(plan.keep), plan.budget_bytes,
                    plan.reserve_bytes};
  ExportResult result = ExportPlan(loaded.graph, input, target);
  if (options.output_path.empty()) {
    out << result.text;
    err << result.report;
  } else {
    WriteFileAtomic(options.output_path, result.text);
    out << result.report;
  }
  return kExitOk;
}

}  // namespace ckptplan
