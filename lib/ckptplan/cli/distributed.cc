#include "ckptplan/cli/distributed.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/base/size.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/dist/pipeline.h"
#include "ckptplan/emit/report.h"

namespace ckptplan {
namespace {

using nlohmann::ordered_json;

// One distinct rank with its simulations and the save set applied to it.
struct RankRun {
  RankGraph rank;
  SaveSet keep;
  SimResult save_all;
  SimResult planned;
  LowerBound bound;
};

SimResult SimulateRank(const Graph& graph, const SaveSet& keep, int64_t reserve) {
  SimOptions options;
  options.reserve_bytes = reserve;
  options.record_categories = false;
  return Simulate(graph, keep, options);
}

// A save set made on one rank's graph, for another rank of the same stage:
// tensor ids agree; the entries past the original graph's tensors (collective
// buffers) are not candidates.
SaveSet Resize(SaveSet keep, const Graph& graph) {
  keep.resize(graph.tensors.size(), 1);
  return keep;
}

ordered_json LayoutJson(const ParallelLayout& l) {
  ordered_json j;
  j["dp"] = l.dp;
  j["zero"] = l.zero;
  j["zero_partition"] = l.zero_partition;
  j["grad_buckets"] = l.grad_buckets;
  j["bucket_cap_bytes"] = l.bucket_cap_bytes;
  j["tp"] = l.tp;
  j["sp"] = l.sp;
  j["tp_embedding"] = l.tp_embedding;
  j["pp"] = l.pp;
  j["microbatches"] = l.microbatches;
  j["schedule"] = l.schedule;
  j["virtual_stages"] = l.virtual_stages;
  j["pp_free_outputs"] = l.pp_free_outputs;
  return j;
}

// Which ranks a RankRun stands for.
ordered_json RankIdJson(const RankGraph& rank) {
  ordered_json r;
  r["pp_stage"] = rank.pp_stage;
  r["tp_rank"] = rank.tp_rank;
  r["dp_rank"] = rank.dp_rank;
  r["count"] = rank.count;
  return r;
}

ordered_json RanksJson(const std::vector<RankRun>& runs) {
  ordered_json ranks = ordered_json::array();
  for (const RankRun& run : runs) {
    ordered_json r = RankIdJson(run.rank);
    r["peak_bytes"] = run.planned.peak_bytes;
    r["peak_breakdown"] = BreakdownJson(run.planned, run.planned.peak_step);
    r["save_all_peak_bytes"] = run.save_all.peak_bytes;
    r["recompute_overhead_percent"] =
        run.planned.step_cost > 0 ? 100.0 * run.planned.recompute_cost / run.planned.step_cost
                                  : 0.0;
    ranks.push_back(std::move(r));
  }
  return ranks;
}

size_t HighestRank(const std::vector<RankRun>& runs) {
  size_t best = 0;  // the first of equals: deterministic
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].planned.peak_bytes > runs[best].planned.peak_bytes) best = i;
  }
  return best;
}

std::string RankTitle(const RankRun& run) {
  return "== pipeline stage " + std::to_string(run.rank.pp_stage) + ", tp rank " +
         std::to_string(run.rank.tp_rank) + ", dp rank " + std::to_string(run.rank.dp_rank) +
         " (" + std::to_string(run.rank.count) + (run.rank.count == 1 ? " rank" : " ranks") +
         ") ==\n";
}

// Text: one section per distinct rank, then the highest.
void PrintRuns(const std::vector<RankRun>& runs, const Summary& base, const ParallelLayout& l,
               bool json, std::ostream& out) {
  const size_t highest = HighestRank(runs);
  auto summary_of = [&](const RankRun& run) {
    Summary s = base;
    s.save_all = &run.save_all;
    s.planned = &run.planned;
    s.keep = &run.keep;
    s.lower_bound = run.bound;
    return s;
  };
  if (json) {
    ordered_json j = SummaryJson(runs[highest].rank.graph, summary_of(runs[highest]));
    j["peak_bytes"] = runs[highest].planned.peak_bytes;
    j["layout"] = LayoutJson(l);
    j["ranks"] = RanksJson(runs);
    out << j.dump(2) << '\n';
    return;
  }
  for (const RankRun& run : runs) {
    out << RankTitle(run) << SummaryText(run.rank.graph, summary_of(run)) << '\n';
  }
  out << "Highest rank: pipeline stage " << runs[highest].rank.pp_stage << ", tp rank "
      << runs[highest].rank.tp_rank << ", dp rank " << runs[highest].rank.dp_rank << ": peak "
      << FormatBytes(runs[highest].planned.peak_bytes) << '\n';
}

// The --timeline file of a parallel layout (docs/formats.md): the timeline
// of the highest rank, as one device's, with "rank" saying which ranks it
// stands for, and "ranks": every distinct rank's timeline (pipeline stages,
// ZeRO's uneven partitions), in the order of the summary.
std::string LayoutTimeline(const std::vector<RankRun>& runs, int64_t reserve) {
  ordered_json ranks = ordered_json::array();
  for (const RankRun& run : runs) {
    SimOptions options;
    options.reserve_bytes = reserve;
    options.record_categories = true;  // the per-step breakdown
    ordered_json timeline =
        TimelineJson(run.rank.graph, Simulate(run.rank.graph, run.keep, options));
    timeline["rank"] = RankIdJson(run.rank);
    ranks.push_back(std::move(timeline));
  }
  ordered_json out = ranks[HighestRank(runs)];
  out["ranks"] = std::move(ranks);
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<RankRun> MakeRuns(const Graph& graph, const ParallelLayout& layout, int64_t reserve) {
  std::vector<RankRun> runs;
  for (RankGraph& rank : DistributeGraph(graph, layout)) {
    RankRun run;
    run.rank = std::move(rank);
    const Graph& g = run.rank.graph;
    run.keep = SaveAll(g);
    run.save_all = SimulateRank(g, run.keep, reserve);
    run.bound = ComputeLowerBound(g, reserve);
    runs.push_back(std::move(run));
  }
  return runs;
}

// A plan for one stage made on fewer microbatches (speed): with 1F1B the
// search runs on the stage built with PlanningMicrobatches (the same
// situations, fewer copies), and the plan, spread to every microbatch
// (UniformPlan), is returned when the full schedule's simulation of `run`
// (the stage's planning rank) fits. Otherwise nothing: the caller searches
// the full stage graph.
std::optional<PlannerResult> PlanOnFewerMicrobatches(const Graph& graph,
                                                     const ParallelLayout& layout,
                                                     const RankRun& run,
                                                     const PlannerOptions& planner) {
  const int stage = run.rank.pp_stage;
  ParallelLayout small = layout;
  small.microbatches = PlanningMicrobatches(layout, stage);
  if (small.microbatches >= layout.microbatches) return std::nullopt;
  for (RankGraph& rank : DistributeGraph(graph, small)) {
    if (rank.pp_stage != stage || rank.dp_rank != run.rank.dp_rank) continue;
    PlannerResult found = PlanGraph(rank.graph, planner);
    const SaveSet keep = UniformPlan(rank.graph, found.keep, run.rank.graph);
    const SimResult sim = SimulateRank(run.rank.graph, keep, planner.reserve_bytes);
    if (sim.peak_bytes > planner.budget_bytes) {
      spdlog::info("plan: stage {}: the plan of {} microbatches peaks at {} on {}; searching "
                   "the full schedule", stage, small.microbatches, FormatBytes(sim.peak_bytes),
                   layout.microbatches);
      return std::nullopt;
    }
    found.keep = keep;
    found.peak = sim.peak_bytes;
    found.recompute_cost = sim.recompute_cost;
    found.fits = true;
    found.method += " on " + std::to_string(small.microbatches) + " of " +
                    std::to_string(layout.microbatches) + " microbatches, every microbatch alike";
    return found;
  }
  return std::nullopt;
}

// The graph a parallel layout is applied to; the per-step outputs are one
// device's and refused.
// `recorded`: the load a plan file records (simulate --plan), which the
// flags override, as for one device.
LoadedGraph LoadForLayout(const CommonOptions& options, LoadOptions* load,
                          const std::optional<LoadOptions>& recorded = std::nullopt,
                          const std::string& plan_path = "") {
  if (!options.report_path.empty() || !options.trace_path.empty() ||
      !options.timeline_csv_path.empty()) {
    throw InputError("--report, --trace and --timeline-csv are one device's; they do not take "
                     "a parallel layout yet (--timeline does: every distinct rank's)",
                     kExitUsage);
  }
  std::vector<std::string> conflicts;
  *load = ResolveLoad(options.load, recorded, &conflicts);
  for (const std::string& conflict : conflicts) spdlog::warn("{}: {}", plan_path, conflict);
  return LoadGraph(options.graph_path, *load);
}

// A distributed plan file's decisions for each rank: the decisions of its
// stage ("stages"), read against the rank's graph; a plan without "stages"
// (one device's) applies its decisions to every rank.
// Returns the first rank's reading (budget, reserve).
LoadedPlan ApplyPlanFile(const std::string& path, std::vector<RankRun>* runs) {
  const std::string text = ReadFile(path);
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  std::map<int, std::string> stage_text;  // a plan file holding one stage's decisions
  if (plan.contains("stages") && plan["stages"].is_array()) {
    for (const nlohmann::json& stage : plan["stages"]) {
      if (!stage.is_object() || !stage.contains("pp_stage") || !stage["pp_stage"].is_number_integer() ||
          !stage.contains("decisions")) {
        throw InputError(path + ": \"stages\": each entry needs \"pp_stage\" and \"decisions\"");
      }
      nlohmann::json one = plan;
      one.erase("stages");
      one["decisions"] = stage["decisions"];
      stage_text[stage["pp_stage"].get<int>()] = one.dump();
    }
  }
  LoadedPlan first;
  for (RankRun& run : *runs) {
    auto found = stage_text.find(run.rank.pp_stage);
    if (!stage_text.empty() && found == stage_text.end()) {
      throw InputError(path + ": \"stages\" has no entry for pipeline stage " +
                       std::to_string(run.rank.pp_stage));
    }
    const std::string where = path + " (pipeline stage " + std::to_string(run.rank.pp_stage) + ")";
    const LoadedPlan loaded = found == stage_text.end()
                                  ? ParsePlan(run.rank.graph, text, path)
                                  : ParsePlan(run.rank.graph, found->second, where);
    run.keep = Resize(loaded.keep, run.rank.graph);
    if (&run == &runs->front()) first = loaded;
  }
  return first;
}

}  // namespace

std::string LayoutFlagName(const std::string& field) {
  if (field == "bucket_cap_bytes") return "--bucket-cap";
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

int RunDistributedSimulate(const SimulateOptions& options, std::ostream& out) {
  LoadOptions load;
  const std::optional<LoadOptions> recorded =
      options.plan_path.empty() ? std::nullopt : ReadPlanHeader(options.plan_path).load;
  LoadedGraph loaded = LoadForLayout(options, &load, recorded, options.plan_path);
  std::vector<RankRun> runs =
      MakeRuns(loaded.graph, options.layout, options.reserve_bytes.value_or(0));
  int64_t reserve = options.reserve_bytes.value_or(0), budget = -1;
  if (!options.plan_path.empty()) {
    const LoadedPlan plan = ApplyPlanFile(options.plan_path, &runs);
    budget = plan.budget_bytes;
    reserve = options.reserve_bytes.value_or(plan.reserve_bytes);
  }
  for (RankRun& run : runs) run.planned = SimulateRank(run.rank.graph, run.keep, reserve);
  Summary base{"simulate", options.graph_path, budget, reserve, nullptr, nullptr, nullptr,
               LowerBound(), options.top, !options.plan_path.empty()};
  if (!options.timeline_path.empty()) {
    WriteFileAtomic(options.timeline_path, LayoutTimeline(runs, reserve));
  }
  PrintRuns(runs, base, options.layout, options.json, out);
  return kExitOk;
}

int RunDistributedPlan(const PlanOptions& options, const PlannerOptions& planner,
                       std::ostream& out) {
  LoadOptions load;
  LoadedGraph loaded = LoadForLayout(options, &load);
  std::vector<RankRun> runs =
      MakeRuns(loaded.graph, options.layout, options.reserve_bytes.value_or(0));
  // One plan per stage, made where memory is tightest: the stage's rank with
  // the highest save-all peak; every rank of the stage applies it.
  std::map<int, size_t> planner_rank;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto [it, inserted] = planner_rank.emplace(runs[i].rank.pp_stage, i);
    if (!inserted && runs[i].save_all.peak_bytes > runs[it->second].save_all.peak_bytes) {
      it->second = i;
    }
  }
  std::string infeasible;
  for (const auto& [stage, index] : planner_rank) {
    std::optional<PlannerResult> fewer;
    if (!options.pp_plan_all_microbatches) {
      fewer = PlanOnFewerMicrobatches(loaded.graph, options.layout, runs[index], planner);
    }
    PlanOutcome outcome;
    if (fewer) {
      outcome.found = std::move(*fewer);
    } else {
      outcome = ComputePlan(runs[index].rank.graph, planner, /*per_step=*/false);
    }
    spdlog::info("plan: stage {}: {}", stage, outcome.found.method);
    for (RankRun& run : runs) {
      if (run.rank.pp_stage != stage) continue;
      run.keep = Resize(outcome.found.keep, run.rank.graph);
      run.planned = SimulateRank(run.rank.graph, run.keep, options.reserve_bytes.value_or(0));
      if (run.planned.peak_bytes > options.budget_bytes.value_or(0) && infeasible.empty()) {
        infeasible = "pipeline stage " + std::to_string(stage) + ", dp rank " +
                     std::to_string(run.rank.dp_rank) + ": " + (outcome.infeasible.empty()
                                           ? "peak " + FormatBytes(run.planned.peak_bytes) +
                                                 " > budget " + FormatBytes(options.budget_bytes.value_or(0))
                                           : outcome.infeasible);
      }
    }
  }
  if (!infeasible.empty()) throw InfeasibleError(options.graph_path + ": " + infeasible);
  Summary base{"plan", options.graph_path, options.budget_bytes.value_or(0), options.reserve_bytes.value_or(0),
               nullptr, nullptr, nullptr, LowerBound(), options.top};
  std::vector<OutputFile> files;
  if (!options.output_path.empty()) {
    // The plan file of the first stage's planning rank, with the layout and
    // every stage's decisions (docs/formats.md: "parallel" and "stages").
    const RankRun& first = runs[planner_rank.begin()->second];
    PlanRecord record{options.graph_path, loaded.sha256, options.budget_bytes.value_or(0),
                      options.reserve_bytes.value_or(0), options.start,
                      IsOnnxPath(options.graph_path) ? &load : nullptr, &first.save_all,
                      &first.planned, &first.keep, first.bound};
    ordered_json plan = PlanToJson(first.rank.graph, record);
    plan["parallel"] = LayoutJson(options.layout);
    ordered_json stages = ordered_json::array();
    for (const auto& [stage, index] : planner_rank) {
      const RankRun& run = runs[index];
      PlanRecord r{options.graph_path, loaded.sha256, options.budget_bytes.value_or(0),
                   options.reserve_bytes.value_or(0), options.start, nullptr, &run.save_all, &run.planned, &run.keep,
                   run.bound};
      ordered_json s;
      s["pp_stage"] = stage;
      s["predicted_peak_bytes"] = run.planned.peak_bytes;
      s["decisions"] = PlanToJson(run.rank.graph, r)["decisions"];
      stages.push_back(std::move(s));
    }
    plan["stages"] = std::move(stages);
    plan["ranks"] = RanksJson(runs);
    files.push_back({options.output_path, plan.dump(2) + "\n"});
  }
  if (!options.timeline_path.empty()) {
    files.push_back({options.timeline_path,
                     LayoutTimeline(runs, options.reserve_bytes.value_or(0))});
  }
  WriteFilesAtomic(files);  // all or none
  PrintRuns(runs, base, options.layout, options.json, out);
  return kExitOk;
}

}  // namespace ckptplan

namespace ckptplan {
namespace {

// One layout's outcome in the search: the highest rank's peak and the
// highest recompute overhead over the stages.
struct LayoutRow {
  ParallelLayout layout;
  int64_t peak_bytes = 0;
  double overhead_percent = 0;
};

constexpr int kMaxSearchStages = 8;

constexpr int kMaxSearchTp = 8;  // tensor parallelism stays within one 8-GPU node

std::vector<ParallelLayout> CandidateLayouts(int gpus, int layers) {
  std::vector<ParallelLayout> layouts;
  // Up to 8 stages, 1F1B only: with as many microbatches as stages GPipe
  // holds every microbatch on every stage, never less than 1F1B.
  for (int pp = 1; pp <= gpus && pp <= layers && pp <= kMaxSearchStages; ++pp) {
    if (gpus % pp != 0) continue;
    // tp 1, 2, 4, 8 dividing the ranks left, with sequence parallelism
    // (Megatron's advice with tp: it never holds more).
    for (int tp = 1; tp <= kMaxSearchTp && tp <= gpus / pp; tp *= 2) {
      if ((gpus / pp) % tp != 0) continue;
      for (int zero = 0; zero <= 3; ++zero) {
        ParallelLayout l;
        l.dp = gpus / pp / tp;
        l.tp = tp;
        l.sp = tp > 1;
        l.pp = pp;
        l.zero = l.dp > 1 ? zero : 0;
        if (l.dp == 1 && zero > 0) continue;
        // The fewest microbatches that fill the pipeline.
        l.microbatches = pp;
        l.schedule = "1f1b";
        layouts.push_back(l);
      }
    }
  }
  return layouts;
}

int CountLayers(const Graph& graph) {
  std::vector<int> stage = AssignStages(graph, 1);  // validates there is a layer
  (void)stage;
  std::set<std::string> units;
  for (const Node& node : graph.nodes) {
    const std::string unit = ModuleUnit(node.scope);
    const size_t dot = unit.rfind('.');
    if (dot != std::string::npos && dot + 1 < unit.size() &&
        std::all_of(unit.begin() + dot + 1, unit.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      units.insert(unit);
    }
  }
  return static_cast<int>(units.size());
}

// Plans every stage of `layout`; false when a stage cannot fit.
bool PlanLayout(const Graph& graph, const PlannerOptions& planner, LayoutRow* row) {
  std::vector<RankRun> runs = MakeRuns(graph, row->layout, planner.reserve_bytes);
  for (const RankRun& run : runs) {
    if (run.bound.bytes > planner.budget_bytes) return false;
  }
  std::map<int, size_t> worst;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto [it, inserted] = worst.emplace(runs[i].rank.pp_stage, i);
    if (!inserted && runs[i].save_all.peak_bytes > runs[it->second].save_all.peak_bytes) {
      it->second = i;
    }
  }
  for (const auto& [stage, index] : worst) {
    RankRun& run = runs[index];
    SaveSet keep = run.keep;
    if (run.save_all.peak_bytes > planner.budget_bytes) {
      std::optional<PlannerResult> fewer =
          PlanOnFewerMicrobatches(graph, row->layout, run, planner);
      PlannerResult found = fewer ? std::move(*fewer) : PlanGraph(run.rank.graph, planner);
      if (!found.fits) return false;
      keep = found.keep;
    }
    for (RankRun& other : runs) {
      if (other.rank.pp_stage != stage) continue;
      other.planned = SimulateRank(other.rank.graph, Resize(keep, other.rank.graph),
                                   planner.reserve_bytes);
      if (other.planned.peak_bytes > planner.budget_bytes) return false;
      row->peak_bytes = std::max(row->peak_bytes, other.planned.peak_bytes);
      const double overhead = other.planned.step_cost > 0
                                  ? 100.0 * other.planned.recompute_cost / other.planned.step_cost
                                  : 0.0;
      row->overhead_percent = std::max(row->overhead_percent, overhead);
    }
  }
  return true;
}

}  // namespace

int RunParallelSearch(const SweepOptions& options, const PlannerOptions& planner,
                      int gpus, std::ostream& out) {
  if (gpus < 1) throw InputError("--gpus: must be at least 1", kExitUsage);
  if (planner.budget_bytes < 0) {
    throw InputError("sweep --search-parallel: --budget is required", kExitUsage);
  }
  LoadedGraph loaded = LoadGraph(options.graph_path, ResolveLoad(options.load, std::nullopt, nullptr));
  const int layers = CountLayers(loaded.graph);
  std::vector<LayoutRow> rows;
  size_t tried = 0;
  for (const ParallelLayout& layout : CandidateLayouts(gpus, layers)) {
    ++tried;
    LayoutRow row;
    row.layout = layout;
    if (PlanLayout(loaded.graph, planner, &row)) rows.push_back(row);
  }
  // Cheapest first; then the lower peak; then the layout's order (fewer
  // stages, lower tp, lower ZeRO stage).
  std::stable_sort(rows.begin(), rows.end(), [](const LayoutRow& a, const LayoutRow& b) {
    if (a.overhead_percent != b.overhead_percent) return a.overhead_percent < b.overhead_percent;
    return a.peak_bytes < b.peak_bytes;
  });
  if (options.json) {
    ordered_json j;
    j["command"] = "sweep";
    j["graph"] = options.graph_path;
    j["gpus"] = gpus;
    j["budget_bytes"] = planner.budget_bytes;
    j["layouts_tried"] = tried;
    ordered_json list = ordered_json::array();
    for (const LayoutRow& row : rows) {
      ordered_json r = LayoutJson(row.layout);
      r["peak_bytes"] = row.peak_bytes;
      r["recompute_overhead_percent"] = row.overhead_percent;
      list.push_back(std::move(r));
    }
    j["layouts"] = std::move(list);
    out << j.dump(2) << '\n';
    return kExitOk;
  }
  out << "ckptplan sweep --search-parallel: " << options.graph_path << ", " << gpus
      << " GPUs, budget " << FormatBytes(planner.budget_bytes) << " per rank: " << rows.size()
      << " of " << tried << " layouts fit (tp 1-8 with sp, pp <= 8, 1f1b with microbatches = pp)\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  %4s %4s %4s %4s %4s %-6s %12s %10s\n", "dp", "tp", "pp",
                "zero", "mb", "sched", "peak", "recompute");
  out << line;
  for (const LayoutRow& row : rows) {
    const ParallelLayout& l = row.layout;
    std::snprintf(line, sizeof(line), "  %4d %4d %4d %4d %4d %-6s %12s %9.2f%%\n", l.dp, l.tp,
                  l.pp, l.zero, l.microbatches, l.schedule.c_str(),
                  FormatBytes(row.peak_bytes).c_str(), row.overhead_percent);
    out << line;
  }
  return kExitOk;
}

}  // namespace ckptplan
