#include "ckptplan/cli/commands.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>

#include "ckptplan/base/console.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/text_escape.h"
#include "ckptplan/cli/distributed.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/plan/incremental.h"
#include "ckptplan/emit/json_writer.h"
#include "ckptplan/emit/export.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/plan/offload_planner.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/emit/report.h"
#include "ckptplan/emit/report_html.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/base/size.h"
#include "ckptplan/plan/sweep.h"
#include "ckptplan/emit/sweep_report.h"
#include "ckptplan/emit/trace.h"

namespace ckptplan {
namespace {

void PrintSummary(const Graph& graph, const Summary& summary, bool json, std::ostream& out) {
  if (json) {
    out << SummaryJson(graph, summary).dump(2, ' ', true, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    out << EscapeControls(SummaryText(graph, summary));
  }
}

PlannerOptions MakePlannerOptions(const SearchFlags& flags, int64_t reserve_bytes) {
  PlannerOptions options;
  options.reserve_bytes = reserve_bytes;
  options.strategy = flags.strategy;
  if (flags.start != "mincut" && flags.start != "save-all") {
    throw InputError("--start: unknown start set '" + flags.start +
                         "' (expected mincut or save-all)",
                     kExitUsage);
  }
  options.start = flags.start;
  options.policy = MakeRecomputePolicy(flags.policy_path, flags.recomputable_ops);
  return options;
}

// Peak resident set size so far, in KiB.
long PeakRssKib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// Renders the --report, --trace and --timeline-csv files the options ask for;
// with `offloaded` (whose rewrite is `graph`), the copies on their own lanes.
void RenderReports(const Graph& graph, const CommonOptions& options, const Summary& summary,
                   std::vector<OutputFile>* files, const OffloadedGraph* offloaded = nullptr) {
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
    input.offloaded = offloaded;
    input.approx = summary.approx;
    files->push_back({options.report_path, RenderHtmlReport(graph, input)});
  }
  if (!options.trace_path.empty()) {
    std::string label = !summary.has_plan ? "save-all" : summary.command == "plan" ? "planned"
                                                                                 : "simulated";
    files->push_back({options.trace_path, TraceJson(graph, *planned, label, offloaded)});
  }
  if (!options.timeline_csv_path.empty()) {
    files->push_back({options.timeline_csv_path, TimelineCsv(graph, *planned)});
  }
}

// Load settings for a graph a plan was made on: the plan's recorded ones,
// each flag given overriding its value (with a warning when they differ).
LoadOptions PlanLoadOptions(const LoadFlags& flags, const PlanHeader& header,
                            const std::string& plan_path) {
  std::vector<std::string> conflicts;
  LoadOptions load = ResolveLoad(flags, header.load, &conflicts);
  for (const std::string& conflict : conflicts) spdlog::warn("{}: {}", plan_path, conflict);
  return load;
}

// A plan file's approximations on `sim`, the simulation of its save set on
// `graph` (`rewritten`: the node map when that graph is an offload rewrite).
// Each approximated node must be re-run by the plan's recomputation.
ApproxPlan PlanFileApproximations(const Graph& graph, const SimResult& sim, const LoadedPlan& plan,
                                  const std::string& plan_path,
                                  const std::vector<NodeId>* rewritten) {
  std::vector<std::pair<NodeId, size_t>> chosen = plan.approximations;
  if (rewritten != nullptr) {
    for (auto& [node, option] : chosen) node = (*rewritten)[node];
  }
  ApproxPlan approx = EvaluateApproximations(graph, sim, chosen, plan.max_error);
  for (const ApproxChoice& choice : approx.choices) {
    if (choice.reruns == 0) {
      throw InputError(plan_path + ": approximations: node '" +
                       ShowName(graph.nodes[choice.node].name) +
                       "' is not re-run by the plan's recomputation, so it cannot run "
                       "approximately");
    }
  }
  if (std::fabs(approx.estimated_error - plan.estimated_error) > 1e-9 * (1 + plan.estimated_error)) {
    spdlog::warn("{}: the plan records estimated error {}, the graph's options give {}", plan_path,
                 ErrorText(plan.estimated_error), ErrorText(approx.estimated_error));
  }
  if (approx.estimated_error > plan.max_error) {
    spdlog::warn("{}: estimated error {} is over the plan's max_error {}", plan_path,
                 ErrorText(approx.estimated_error), ErrorText(plan.max_error));
  }
  return approx;
}

}  // namespace

namespace {

// The offload settings `plan` times copies with; none when no host link is
// known (see PlanOptions).
std::optional<OffloadSettings> OffloadSettingsFor(const PlanOptions& options,
                                                  const LoadOptions& load) {
  std::optional<double> link = options.host_link_bytes_per_s;
  if (!link && options.load.device && options.load.device->host_link > 0) {
    link = options.load.device->host_link;
  }
  if (!link) return std::nullopt;
  OffloadSettings settings;
  settings.link = {*link, *link};
  settings.flops_per_us =
      options.compute_flops_per_s.value_or(load.device->matrix_16bit_flops) / 1e6;
  settings.host_budget_bytes = options.host_budget_bytes;
  return settings;
}

// `sim`, a simulation of the loaded graph, with its steps naming the nodes of
// `offloaded`'s rewrite instead (the summary's save-all line).
SimResult OnRewrite(SimResult sim, const OffloadedGraph& offloaded) {
  for (Step& step : sim.steps) step.node = offloaded.rewritten_node[step.node];
  return sim;
}

// One line per offloaded tensor after the summary.
void PrintOffloads(const Graph& graph, const OffloadedGraph& offloaded, std::ostream& out) {
  out << "\nOffloaded to host (exposed copy time " << offloaded.exposed_us << " us, host peak "
      << FormatBytes(offloaded.host_peak_bytes) << "):\n";
  for (const OffloadCopy& copy : offloaded.copies) {
    out << "  " << ShowName(graph.tensors[copy.tensor].name) << "  " << FormatBytes(copy.bytes)
        << "  freed after '" << ShowName(graph.nodes[copy.freed_after].name)
        << "', back before '" << ShowName(graph.nodes[copy.reloaded_before].name) << "'\n";
  }
}

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out) {
  if (!options.budget_bytes) throw InputError("plan: --budget is required", kExitUsage);
  const int64_t budget_bytes = *options.budget_bytes;
  const int64_t reserve_bytes = options.reserve_bytes.value_or(0);
  CheckReserve(reserve_bytes, "--reserve");
  PlannerOptions planner_options = MakePlannerOptions(options, reserve_bytes);
  planner_options.budget_bytes = budget_bytes;
  if (options.planner != "incremental" && options.planner != "reference") {
    throw InputError("--planner: unknown planner '" + options.planner +
                         "' (expected incremental or reference)",
                     kExitUsage);
  }
  planner_options.reference_greedy = options.planner == "reference";
  if (options.max_error > 0 && !options.layout.IsSingleDevice()) {
    throw InputError("--max-error: approximate recompute is planned for one device only (not "
                     "with --dp, --zero, --tp, --pp)",
                     kExitUsage);
  }
  if (!options.layout.IsSingleDevice()) return RunDistributedPlan(options, planner_options, out);
  auto clock = std::chrono::steady_clock::now();
  const LoadOptions load = ResolveLoad(options.load, std::nullopt, nullptr);
  LoadedGraph loaded = LoadGraph(options.graph_path, load);
  const double parse_s = SecondsSince(clock);
  const long parse_rss_kib = options.timings ? PeakRssKib() : 0;
  const Graph& graph = loaded.graph;
  // Categories at every step only for the outputs that chart them.
  const bool per_step = !options.timeline_path.empty() || !options.report_path.empty() ||
                        !options.trace_path.empty() || !options.timeline_csv_path.empty();
  PlanOutcome outcome = ComputePlan(graph, planner_options, per_step);
  // Approximate recompute: approximations on the plan, which is re-planned
  // when the approximate costs make another one cheaper (same budget).
  std::optional<ApproxPlan> approx;
  if (options.max_error > 0) {
    ApproxPlanned approximate =
        PlanApproximations(graph, planner_options, outcome.found, options.max_error);
    if (approximate.found.keep != outcome.found.keep) {
      outcome.found = std::move(approximate.found);
      outcome.planned = SimulateRecorded(graph, outcome.found.keep, reserve_bytes, per_step);
    }
    approx = std::move(approximate.approx);
    if (approx->any()) {  // the peak with the approximations' workspace and factors
      const std::vector<uint32_t> by_node = ApproxOptionsByNode(graph, *approx);
      outcome.planned =
          SimulateRecorded(graph, outcome.found.keep, reserve_bytes, per_step, &by_node);
      outcome.found.peak = outcome.planned.peak_bytes;
    }
  }
  spdlog::info("plan: {}", outcome.found.method);
  const SimResult& save_all = outcome.save_all;
  const SimResult& planned = outcome.planned;
  const PlannerResult& found = outcome.found;
  const LowerBound& bound = outcome.bound;
  if (options.timings) {
    size_t drops = 0;  // candidates the plan recomputes
    for (TensorId t : SaveCandidates(graph)) drops += found.keep[t] == 0;
    // One line for scripts/bench_scale.py; the peak is in exact bytes.
    std::cerr << "timings: parse_s=" << parse_s << " simulate_s=" << outcome.simulate_seconds
              << " plan_s=" << outcome.plan_seconds << " plan_cpu_s=" << outcome.plan_cpu_seconds
              << " recompute_cost=" << planned.recompute_cost << " step_cost=" << planned.step_cost
              << " nodes=" << graph.nodes.size()
              << " drops=" << drops << " save_all_peak=" << save_all.peak_bytes
              << " peak=" << planned.peak_bytes << " fits=" << found.fits
              << " parse_rss_kib=" << parse_rss_kib << " rss_kib=" << PeakRssKib() << '\n';
  }
  // Offload, when a host link is known: the cheapest of the recompute-only
  // plan and those that offload; the outputs then describe the rewrite.
  const std::optional<OffloadSettings> offload_settings = OffloadSettingsFor(options, load);
  std::optional<OffloadedGraph> offloaded;
  SimResult offload_planned, offload_save_all;
  SaveSet offload_keep;
  if (!offload_settings && !found.fits) {
    throw InfeasibleError(options.graph_path + ": " + outcome.infeasible);
  }
  if (offload_settings) {
    const OffloadOptions offload = TimeOffloads(graph, *offload_settings);
    const OffloadPlan chosen = PlanOffload(graph, planner_options, offload, found);
    if (!chosen.fits) {
      std::string why = outcome.infeasible + ", with offload " + FormatBytes(chosen.peak);
      if (offload.host_budget_bytes) {
        OffloadOptions unlimited = offload;
        unlimited.host_budget_bytes.reset();
        const OffloadPlan over = PlanOffload(graph, planner_options, unlimited, found);
        if (over.fits) {
          why += "; a plan offloading " + std::to_string(over.offloaded.size()) +
                 " tensors fits but holds " + FormatBytes(over.host_peak_bytes) +
                 " on the host, over the host budget of " +
                 FormatBytes(*offload.host_budget_bytes);
        }
      }
      throw InfeasibleError(options.graph_path + ": " + why);
    }
    if (!chosen.offloaded.empty()) {
      offloaded = ApplyOffload(graph, chosen.offloaded, offload);
      offload_keep = KeepOnRewrite(chosen.keep, *offloaded);
      offload_planned = SimulateRecorded(offloaded->graph, offload_keep, reserve_bytes, per_step);
      offload_save_all = OnRewrite(save_all, *offloaded);
      spdlog::info("plan: {} offloaded, exposed {} us, host peak {} bytes",
                   chosen.offloaded.size(), offloaded->exposed_us, offloaded->host_peak_bytes);
    }
  }
  const Graph& out_graph = offloaded ? offloaded->graph : graph;
  const SaveSet& out_keep = offloaded ? offload_keep : found.keep;
  if (approx && offloaded) {
    ApproxFit fit;
    fit.keep = &offload_keep;
    fit.sim.reserve_bytes = reserve_bytes;
    fit.budget_bytes = budget_bytes;
    approx = ChooseApproximations(out_graph, offload_planned, options.max_error, &fit);
    if (approx->any()) {
      const std::vector<uint32_t> by_node = ApproxOptionsByNode(out_graph, *approx);
      offload_planned =
          SimulateRecorded(out_graph, offload_keep, reserve_bytes, per_step, &by_node);
    }
  }
  const SimResult& out_planned = offloaded ? offload_planned : planned;
  const SimResult& out_save_all = offloaded ? offload_save_all : save_all;
  Summary summary{"plan", options.graph_path, budget_bytes, reserve_bytes,
                  &out_save_all, &out_planned, &out_keep, bound, options.top};
  if (approx) summary.approx = &*approx;
  // Render everything before writing anything, so a failure leaves no files.
  std::string plan_text, timeline_text;
  if (!options.output_path.empty()) {
    PlanRecord record{options.graph_path, loaded.sha256, budget_bytes, reserve_bytes,
                      options.start, IsOnnxPath(options.graph_path) ? &load : nullptr,
                      &save_all, &out_planned, &out_keep, bound};
    if (offloaded) {
      record.offloaded = &*offloaded;
      record.offload_settings = &*offload_settings;
    }
    if (approx) record.approx = &*approx;
    plan_text = PlanToJson(out_graph, record)
                    .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                "\n";
  }
  if (!options.timeline_path.empty()) {
    timeline_text = TimelineJson(out_graph, out_planned)
                        .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                    "\n";
  }
  std::vector<OutputFile> reports;
  RenderReports(out_graph, options, summary, &reports, offloaded ? &*offloaded : nullptr);
  if (!plan_text.empty()) reports.push_back({options.output_path, std::move(plan_text)});
  if (!timeline_text.empty()) reports.push_back({options.timeline_path, std::move(timeline_text)});
  WriteFilesAtomic(reports);  // all or none
  PrintSummary(out_graph, summary, options.json, out);
  if (offloaded && !options.json) PrintOffloads(graph, *offloaded, out);
  return kExitOk;
}

int RunSimulate(const SimulateOptions& options, std::ostream& out) {
  if (options.reserve_bytes) CheckReserve(*options.reserve_bytes, "--reserve");
  if (!options.layout.IsSingleDevice()) return RunDistributedSimulate(options, out);
  const LoadOptions load =
      options.plan_path.empty()
          ? ResolveLoad(options.load, std::nullopt, nullptr)
          : PlanLoadOptions(options.load, ReadPlanHeader(options.plan_path), options.plan_path);
  LoadedGraph loaded = LoadGraph(options.graph_path, load);
  const Graph& graph = loaded.graph;
  SaveSet keep = SaveAll(graph);
  int64_t reserve = options.reserve_bytes.value_or(0);
  int64_t budget = -1;
  std::optional<OffloadedGraph> offloaded;
  LoadedPlan plan;
  if (!options.plan_path.empty()) {
    plan = ReadPlan(graph, options.plan_path);
    if (!plan.graph_sha256.empty() && plan.graph_sha256 != loaded.sha256) {
      spdlog::warn("{}: plan was made for a graph with a different digest than {}",
                   options.plan_path, options.graph_path);
    }
    keep = std::move(plan.keep);
    budget = plan.budget_bytes;
    reserve = options.reserve_bytes.value_or(plan.reserve_bytes);
    if (!plan.offloaded.empty()) {
      offloaded = ApplyOffload(graph, plan.offloaded, TimeOffloads(graph, plan.offload));
    }
  }
  SimResult save_all = SimulateRecorded(graph, SaveAll(graph), reserve);
  // A plan that offloads is simulated on the graph rewritten as it says.
  const Graph& sim_graph = offloaded ? offloaded->graph : graph;
  if (offloaded) {
    keep = KeepOnRewrite(keep, *offloaded);
    save_all = OnRewrite(std::move(save_all), *offloaded);
  }
  SimResult simulated = SimulateRecorded(sim_graph, keep, reserve);
  Summary summary{"simulate", options.graph_path, budget, reserve, &save_all, &simulated,
                  &keep, ComputeLowerBound(graph, reserve), options.top,
                  !options.plan_path.empty()};
  std::optional<ApproxPlan> approx;
  if (!plan.approximations.empty()) {
    approx = PlanFileApproximations(sim_graph, simulated, plan, options.plan_path,
                                    offloaded ? &offloaded->rewritten_node : nullptr);
    summary.approx = &*approx;
    // The peak with the approximations' workspace and factors, as `plan` gave it.
    const std::vector<uint32_t> by_node = ApproxOptionsByNode(sim_graph, *approx);
    simulated = SimulateRecorded(sim_graph, keep, reserve, true, &by_node);
  }
  std::vector<OutputFile> reports;
  if (!options.timeline_path.empty()) {
    reports.push_back({options.timeline_path,
                       TimelineJson(sim_graph, simulated)
                               .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n"});
  }
  RenderReports(sim_graph, options, summary, &reports, offloaded ? &*offloaded : nullptr);
  WriteFilesAtomic(reports);  // all or none
  PrintSummary(sim_graph, summary, options.json, out);
  if (offloaded && !options.json) PrintOffloads(graph, *offloaded, out);
  return kExitOk;
}

int RunGenerate(const GenerateOptions& options, std::ostream& out) {
  if (options.output_path.empty()) throw InputError("generate: -o is required", kExitUsage);
  Graph graph;
  if (options.kind == "transformer") {
    const TransformerOptions& t = options.transformer;
    if (t.layers < 1 || t.microbatches < 1 || t.batch < 1 || t.seq < 1 || t.hidden < 1 ||
        t.heads < 1 || t.vocab < 1) {
      throw InputError("generate transformer: every size must be at least 1", kExitUsage);
    }
    if (t.hidden % t.heads != 0) {
      throw InputError("generate transformer: --hidden " + std::to_string(t.hidden) +
                           " is not a multiple of --heads " + std::to_string(t.heads),
                       kExitUsage);
    }
    graph = TransformerGraph(t);
  } else if (options.kind == "random") {
    const RandomGraphOptions& r = options.random;
    if (r.layers < 1 || r.width < 1 || r.max_inputs < 1 || r.min_bytes < 0 ||
        r.max_bytes < r.min_bytes) {
      throw InputError("generate random: --layers, --width and --max-inputs must be at least 1 "
                       "and 0 <= --min-bytes <= --max-bytes",
                       kExitUsage);
    }
    graph = RandomTrainingGraph(r);
  } else {
    throw InputError("generate: unknown kind '" + options.kind +
                         "' (expected transformer or random)",
                     kExitUsage);
  }
  WriteFileAtomic(options.output_path, GraphToJson(graph));
  out << "generated " << graph.source << ": " << graph.nodes.size() << " nodes, "
      << graph.tensors.size() << " tensors -> " << options.output_path << '\n';
  return kExitOk;
}

int RunSweep(const SweepOptions& options, std::ostream& out) {
  const int64_t reserve_bytes = options.reserve_bytes.value_or(0);
  CheckReserve(reserve_bytes, "--reserve");
  if (options.budgets.empty()) {
    throw InputError("sweep: give --from, --to and --steps, or --budgets", kExitUsage);
  }
  if (!options.timeline_path.empty() || !options.trace_path.empty() ||
      !options.timeline_csv_path.empty()) {
    throw InputError("sweep: --timeline, --trace and --timeline-csv describe one plan; use them "
                     "with `plan` (sweep takes --report)",
                     kExitUsage);
  }
  PlannerOptions planner_options = MakePlannerOptions(options, reserve_bytes);
  LoadedGraph loaded =
      LoadGraph(options.graph_path, ResolveLoad(options.load, std::nullopt, nullptr));
  SweepResult sweep = RunSweep(loaded.graph, options.budgets, planner_options);
  if (!options.report_path.empty()) {
    HtmlReportInput input;
    input.command = "sweep";
    input.graph_path = options.graph_path;
    input.reserve_bytes = reserve_bytes;
    for (const SweepRow& row : sweep.rows) {
      input.sweep.push_back({row.budget_bytes, row.peak_bytes, row.recompute_cost, row.feasible});
    }
    WriteFileAtomic(options.report_path, RenderHtmlReport(loaded.graph, input));
  }
  if (options.json) {
    out << SweepJson(loaded.graph, options.graph_path, sweep).dump(2, ' ', true, nlohmann::json::error_handler_t::replace)
        << '\n';
  } else {
    out << EscapeControls(SweepText(loaded.graph, options.graph_path, sweep));
  }
  return kExitOk;
}

int RunSweepParallel(const SweepOptions& options, int gpus, int64_t budget_bytes,
                     std::ostream& out) {
  const int64_t reserve_bytes = options.reserve_bytes.value_or(0);
  CheckReserve(reserve_bytes, "--reserve");
  PlannerOptions planner_options = MakePlannerOptions(options, reserve_bytes);
  planner_options.budget_bytes = budget_bytes;
  return RunParallelSearch(options, planner_options, gpus, out);
}

int RunExport(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  const PlanHeader header = ReadPlanHeader(options.plan_path);
  std::string graph_path = options.graph_path.empty() ? header.graph_file : options.graph_path;
  if (graph_path.empty()) {
    throw InputError(options.plan_path + ": names no graph file (\"graph\": {\"file\": ...}); "
                     "pass --graph",
                     kExitUsage);
  }
  LoadedGraph loaded =
      LoadGraph(graph_path, PlanLoadOptions(options.load, header, options.plan_path));
  LoadedPlan plan = ReadPlan(loaded.graph, options.plan_path);
  if (!plan.graph_sha256.empty() && plan.graph_sha256 != loaded.sha256) {
    spdlog::warn("{}: plan was made for a graph with a different digest than {}",
                 options.plan_path, graph_path);
  }
  std::optional<ApproxPlan> approx;
  if (!plan.approximations.empty()) {
    const SimResult sim =
        SimulateRecorded(loaded.graph, plan.keep, plan.reserve_bytes, /*per_step=*/false);
    approx = PlanFileApproximations(loaded.graph, sim, plan, options.plan_path, nullptr);
  }
  ExportInput input;
  input.plan_path = options.plan_path;
  input.keep = std::move(plan.keep);
  input.budget_bytes = plan.budget_bytes;
  input.reserve_bytes = plan.reserve_bytes;
  if (!plan.offloaded.empty()) {
    input.offloaded = plan.offloaded;
    input.offload = TimeOffloads(loaded.graph, plan.offload);
  }
  if (approx) input.approx = &*approx;
  ExportResult result = ExportPlan(loaded.graph, input, options.target);
  if (options.output_path.empty()) {
    out << result.text;
    err << EscapeControls(result.report);
  } else {
    WriteFileAtomic(options.output_path, result.text);
    out << EscapeControls(result.report);
  }
  return kExitOk;
}

}  // namespace ckptplan
