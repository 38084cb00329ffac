#include "ckptplan/commands.h"

#include <spdlog/spdlog.h>

#include "ckptplan/errors.h"
#include "ckptplan/limits.h"
#include "ckptplan/output_file.h"
#include "ckptplan/plan_io.h"
#include "ckptplan/report.h"
#include "ckptplan/report_html.h"
#include "ckptplan/selector.h"
#include "ckptplan/simulator.h"
#include "ckptplan/size.h"
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

SaveSet StartSet(const Graph& graph, const std::string& start) {
  if (start == "save-all") return SaveAll(graph);
  throw InputError("--start: unknown start set '" + start + "' (expected save-all)", kExitUsage);
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

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out) {
  if (options.budget_bytes < 0) throw InputError("plan: --budget is required", kExitUsage);
  CheckReserve(options.reserve_bytes, "--reserve");
  LoadedGraph loaded = LoadGraph(options.graph_path, options.load);
  const Graph& graph = loaded.graph;
  LowerBound bound = ComputeLowerBound(graph, options.reserve_bytes);
  GreedyOptions greedy_options;
  greedy_options.budget_bytes = options.budget_bytes;
  greedy_options.reserve_bytes = options.reserve_bytes;
  GreedyResult greedy = GreedyPlan(graph, StartSet(graph, options.start), greedy_options);

  SimResult save_all = SimulateRecorded(graph, SaveAll(graph), options.reserve_bytes);
  SimResult planned = SimulateRecorded(graph, greedy.keep, options.reserve_bytes);
  if (!greedy.fits) {
    std::string why = options.budget_bytes < bound.bytes
                          ? "no plan can fit: the lower bound is " + FormatBytes(bound.bytes) +
                                " = " + DescribeLowerBound(graph, bound) + " > budget " +
                                FormatBytes(options.budget_bytes)
                          : "the best plan found peaks at " + FormatBytes(planned.peak_bytes) +
                                " > budget " + FormatBytes(options.budget_bytes) +
                                " (lower bound " + FormatBytes(bound.bytes) + " = " +
                                DescribeLowerBound(graph, bound) + ")";
    throw InfeasibleError(options.graph_path + ": " + why);
  }
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

}  // namespace ckptplan
