#include "ckptplan/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

#include "ckptplan/plan/cleanup.h"
#include "ckptplan/base/console.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/plan/incremental.h"
#include "ckptplan/plan/local_search.h"
#include "ckptplan/plan/mincut.h"
#include "ckptplan/plan/selector.h"

namespace ckptplan {
namespace {

// Most segment counts the every-k-th search tries.
constexpr int kMaxSegments = 64;
// Local search runs from this many of the best plans when the graph has at
// most kManyStartsLimit candidates, from the best one otherwise.
constexpr size_t kLocalSearchStarts = 4;
constexpr size_t kManyStartsLimit = 64;
// Local search is capped at this many node-steps per search (e.g. 20000
// moves considered in a 200-node region), so that it stays a small part of
// the planning time on large graphs. Its single flips simulate one region
// (FindRegions) each. The cap counts moves considered, simulated or ruled out
// by a floor, so that pruning does not change where the search stops.
constexpr size_t kLocalSearchNodeSteps = 4'000'000;
// The every-k-th search simulates the whole step once per k: it tries at most
// this many node-steps' worth of k (and at least kMinSegments).
constexpr size_t kSegmentNodeSteps = 1'000'000;
constexpr int kMinSegments = 2;
// Above this many candidates the greedy runs from the --start set only: on
// such graphs (e.g. many microbatches) both starts end at the same plans
// while each greedy takes seconds.
constexpr size_t kSecondStartLimit = 10'000;

class Candidates {
 public:
  Candidates(const SimContext& context, const PlannerOptions& options, bool cleanup = true)
      : context_(context), options_(options), cleanup_(cleanup) {
    sim_options_.reserve_bytes = options.reserve_bytes;
    sim_options_.record_details = false;  // only the peak and the cost are read
  }

  PlannerResult Measure(SaveSet keep, std::string method) const {
    SimResult sim = Simulate(context_, keep, sim_options_);
    return Result(std::move(keep), sim.peak_bytes, sim.recompute_cost, std::move(method));
  }

  // Adds a plan found since `since` (for the log's timings); fitting plans
  // are cleaned up first.
  void Add(SaveSet keep, std::string method,
           std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now()) {
    PlannerResult result = Measure(std::move(keep), method);
    if (result.fits && cleanup_) {
      CleanupResult cleaned =
          ResaveDropped(context_, result.keep, options_.budget_bytes, options_.reserve_bytes);
      if (!cleaned.resaved.empty()) {
        // The cleanup's figures are the step's, exactly (RegionalMemory).
        result = Result(std::move(cleaned.keep), cleaned.peak_after, cleaned.cost_after,
                        method + " + cleanup");
      }
    }
    spdlog::debug("planner: {}: peak {} bytes, cost {}, {} ({:.3f} s)", result.method, result.peak,
                  result.recompute_cost, result.fits ? "fits" : "does not fit",
                  SecondsSince(since));
    if (!has_best_ || Better(result, best_)) {
      best_ = result;
      has_best_ = true;
    }
    all_.push_back(std::move(result));
  }

  const PlannerResult& best() const { return best_; }

  // The `count` best plans with distinct save sets, best first.
  std::vector<PlannerResult> Top(size_t count) const {
    std::vector<PlannerResult> sorted = all_;
    std::stable_sort(sorted.begin(), sorted.end(), Better);
    std::vector<PlannerResult> top;
    for (PlannerResult& plan : sorted) {
      if (top.size() == count) break;
      bool seen = false;
      for (const PlannerResult& other : top) seen = seen || other.keep == plan.keep;
      if (!seen) top.push_back(std::move(plan));
    }
    return top;
  }

 private:
  // A plan with its peak and recompute cost, judged against the budget.
  PlannerResult Result(SaveSet keep, int64_t peak, double cost, std::string method) const {
    PlannerResult result;
    result.keep = std::move(keep);
    result.peak = peak;
    result.recompute_cost = cost;
    result.fits = peak <= options_.budget_bytes;
    result.method = std::move(method);
    return result;
  }

  // Fitting beats not fitting; then lower cost (fitting) or lower peak.
  // Ties keep the earlier plan.
  static bool Better(const PlannerResult& a, const PlannerResult& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits)
      return a.recompute_cost < b.recompute_cost ||
             (a.recompute_cost == b.recompute_cost && a.peak < b.peak);
    return a.peak < b.peak || (a.peak == b.peak && a.recompute_cost < b.recompute_cost);
  }

  const SimContext& context_;
  const PlannerOptions& options_;
  const bool cleanup_;
  SimOptions sim_options_;
  PlannerResult best_;
  bool has_best_ = false;
  std::vector<PlannerResult> all_;  // every plan added, in order
};

SaveSet Greedy(const SimContext& context, const SaveSet& start, const PlannerOptions& options) {
  GreedyOptions greedy;
  greedy.budget_bytes = options.budget_bytes;
  greedy.reserve_bytes = options.reserve_bytes;
  greedy.prune = options.prune;
  greedy.verify = options.verify;
  if (options.reference_greedy) return GreedyPlan(context.graph, start, greedy).keep;
  return IncrementalPlan(context, start, greedy).keep;
}

// Every-k-th: the fitting segment plan of least cost, else the lowest peak.
void AddBestSegments(const SimContext& context, const PlannerOptions& options,
                     Candidates* candidates) {
  const Graph& graph = context.graph;
  size_t forward = 0;
  for (const Node& node : graph.nodes) forward += node.phase == Phase::kForward;
  // Compared raw; only the chosen one is cleaned up (by `candidates`).
  Candidates segments(context, options, /*cleanup=*/false);
  const size_t affordable =
      std::max<size_t>(kMinSegments, kSegmentNodeSteps / std::max<size_t>(graph.nodes.size(), 1));
  const int most = static_cast<int>(std::min<size_t>({forward, kMaxSegments, affordable}));
  const auto since = std::chrono::steady_clock::now();
  for (int k = 1; k <= most; ++k) {
    segments.Add(SegmentPlan(graph, k), std::to_string(k) + " segments");
  }
  spdlog::debug("planner: {} segment plans ({:.3f} s)", most,
                SecondsSince(since));
  const PlannerResult& best = segments.best();
  if (best.keep.empty()) return;
  candidates->Add(best.keep, best.method);
  if (!best.fits) candidates->Add(Greedy(context, best.keep, options), "greedy from " + best.method);
}

PlannerResult PlanDefault(const SimContext& context, const PlannerOptions& options) {
  const Graph& graph = context.graph;
  Candidates candidates(context, options);
  const size_t num_candidates = context.candidates.size();
  std::vector<std::string> starts{options.start};
  if (num_candidates <= kSecondStartLimit) {
    starts.push_back(options.start == "mincut" ? "save-all" : "mincut");
  }
  for (const std::string& start : starts) {
    const auto since = std::chrono::steady_clock::now();
    candidates.Add(Greedy(context, StartSet(context, start, options.policy), options),
                   "greedy from " + start, since);
  }
  AddBestSegments(context, options, &candidates);
  candidates.Add(SaveAll(graph), "save-all");
  candidates.Add(ScopeCheckpointPlan(graph), "scope-checkpoint");
  candidates.Add(SqrtSegmentsPlan(graph), "sqrt-segments");
  candidates.Add(KnapsackPlan(graph, options.budget_bytes, options.reserve_bytes), "knapsack");

  // Local search from the best few distinct plans (one on large graphs).
  LocalSearchOptions search;
  search.budget_bytes = options.budget_bytes;
  search.reserve_bytes = options.reserve_bytes;
  // Single flips simulate their region (the whole step when costs are not
  // exact integers; see RegionalMemory).
  size_t largest_region = context.exact_costs ? 1 : graph.nodes.size();
  for (const Region& region : context.regions()) {
    largest_region = std::max<size_t>(largest_region, region.end - region.first);
  }
  search.prune = options.prune;
  search.verify = options.verify;
  search.max_considered = std::clamp<size_t>(kLocalSearchNodeSteps / largest_region, 200,
                                             search.max_considered);
  const size_t search_starts = num_candidates <= kManyStartsLimit ? kLocalSearchStarts : 1;
  search.triple_limit = 0;
  for (const PlannerResult& start : candidates.Top(search_starts)) {
    const auto since = std::chrono::steady_clock::now();
    LocalSearchResult improved = ImprovePlan(context, start.keep, search);
    spdlog::debug("planner: local search from {}: {} moves ({:.3f} s)", start.method,
                  improved.moves,
                  SecondsSince(since));
    if (improved.moves > 0) candidates.Add(improved.keep, start.method + " + local search");
  }
  // Three-flip moves (small graphs only), from the best plan found.
  search.triple_limit = LocalSearchOptions().triple_limit;
  if (num_candidates <= search.triple_limit) {
    const PlannerResult best = candidates.best();
    LocalSearchResult improved = ImprovePlan(context, best.keep, search);
    if (improved.moves > 0) candidates.Add(improved.keep, best.method + " + local search");
  }
  return candidates.best();
}

}  // namespace

SaveSet StartSet(const Graph& graph, const std::string& start, const RecomputePolicy& policy) {
  return StartSet(SimContext(graph), start, policy);
}

SaveSet StartSet(const SimContext& context, const std::string& start,
                 const RecomputePolicy& policy) {
  if (start == "save-all") return SaveAll(context.graph);
  if (start == "mincut") return MinCutStart(context, policy).keep;
  throw InputError("unknown start set '" + start + "' (expected mincut or save-all)",
                   kExitUsage);
}

PlannerResult PlanGraph(const Graph& graph, const PlannerOptions& options) {
  const SimContext context(graph);
  if (context.droppable.size() < context.candidates.size()) {
    spdlog::info("planner: {} of {} candidates always saved: recomputing them would re-run a "
                 "random op", context.candidates.size() - context.droppable.size(),
                 context.candidates.size());
  }
  Candidates one(context, options);
  PlannerResult result;
  switch (options.strategy) {
    case Strategy::kCkptplan:
      result = PlanDefault(context, options);
      break;
    case Strategy::kGreedy:
      one.Add(Greedy(context, StartSet(context, options.start, options.policy), options),
              "greedy from " + options.start);
      result = one.best();
      break;
    case Strategy::kSaveAll:
      result = one.Measure(SaveAll(graph), "save-all");
      break;
    case Strategy::kScopeCheckpoint:
      result = one.Measure(ScopeCheckpointPlan(graph), "scope-checkpoint");
      break;
    case Strategy::kSqrtSegments:
      result = one.Measure(SqrtSegmentsPlan(graph), "sqrt-segments");
      break;
    case Strategy::kKnapsack:
      result =
          one.Measure(KnapsackPlan(graph, options.budget_bytes, options.reserve_bytes), "knapsack");
      break;
  }
  spdlog::info("planner: {}: {}, peak {} bytes (budget {}), recompute cost {}",
               ToString(options.strategy), result.method, result.peak, options.budget_bytes,
               result.recompute_cost);
  return result;
}

}  // namespace ckptplan
