#include "ckptplan/plan/offload_planner.h"

#include <algorithm>
#include <spdlog/spdlog.h>
#include <utility>

namespace ckptplan {
namespace {

// Offload-first considers at most this many tensors, the largest first: each
// round simulates every one of them.
constexpr size_t kMaxOffloadFirst = 64;
// Conversions try at most this many recomputed tensors per plan.
constexpr size_t kMaxConversions = 256;

std::vector<TensorId> LargestFirst(const Graph& graph, std::vector<TensorId> tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [&](TensorId a, TensorId b) {
    return graph.tensors[a].bytes > graph.tensors[b].bytes;
  });
  return tensors;
}

std::vector<TensorId> With(std::vector<TensorId> set, TensorId t) {
  set.insert(std::upper_bound(set.begin(), set.end(), t), t);
  return set;
}

// Fitting beats not fitting; then lower cost; then fewer offloads; when
// neither fits, the lower peak.
bool Better(const OffloadPlan& a, const OffloadPlan& b) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) return a.peak < b.peak;
  if (a.cost() != b.cost()) return a.cost() < b.cost();
  return a.offloaded.size() < b.offloaded.size();
}

// Turns recomputed tensors of `plan` into offloaded ones where that still
// fits and costs less.
OffloadPlan Convert(const Graph& graph, OffloadPlan plan, const std::vector<TensorId>& eligible,
                    const OffloadOptions& offload, const PlannerOptions& options) {
  std::vector<TensorId> recomputed;
  for (TensorId t : eligible) {
    if (plan.keep[t] == 0) recomputed.push_back(t);
  }
  recomputed = LargestFirst(graph, std::move(recomputed));
  if (recomputed.size() > kMaxConversions) recomputed.resize(kMaxConversions);
  bool changed = false;
  for (TensorId t : recomputed) {
    SaveSet keep = plan.keep;
    keep[t] = 1;
    OffloadPlan trial = MeasureOffloadPlan(graph, keep, With(plan.offloaded, t), offload, options);
    if (trial.fits && trial.cost() < plan.cost()) {
      plan = std::move(trial);
      changed = true;
    }
  }
  if (changed) plan.method += " + offload conversions";
  return plan;
}

// From save-all, offloads tensors by least added exposed cost per byte of peak
// freed while the peak is over the budget.
std::vector<TensorId> OffloadFirst(const Graph& graph, const std::vector<TensorId>& eligible,
                                   const OffloadOptions& offload, const PlannerOptions& options) {
  std::vector<TensorId> pool = LargestFirst(graph, eligible);
  if (pool.size() > kMaxOffloadFirst) pool.resize(kMaxOffloadFirst);
  std::sort(pool.begin(), pool.end());
  const SaveSet all = SaveAll(graph);
  std::vector<TensorId> chosen;
  OffloadPlan current = MeasureOffloadPlan(graph, all, chosen, offload, options);
  while (current.peak > options.budget_bytes) {
    TensorId best = kNoId;
    OffloadPlan best_plan;
    double best_score = 0;
    for (TensorId t : pool) {
      if (std::binary_search(chosen.begin(), chosen.end(), t)) continue;
      OffloadPlan trial = MeasureOffloadPlan(graph, all, With(chosen, t), offload, options);
      if (trial.over_host_budget || trial.peak >= current.peak) continue;
      const double score = (trial.exposed_cost - current.exposed_cost) /
                           static_cast<double>(current.peak - trial.peak);
      // Lower score, then more bytes freed, then the lower id (pool order).
      if (best == kNoId || score < best_score ||
          (score == best_score && trial.peak < best_plan.peak)) {
        best = t;
        best_score = score;
        best_plan = std::move(trial);
      }
    }
    if (best == kNoId) break;
    chosen = With(chosen, best);
    current = std::move(best_plan);
  }
  return chosen;
}

}  // namespace

OffloadPlan MeasureOffloadPlan(const Graph& graph, const SaveSet& keep,
                               std::vector<TensorId> offloaded, const OffloadOptions& offload,
                               const PlannerOptions& options) {
  OffloadedGraph rewritten = ApplyOffload(graph, std::move(offloaded), offload);
  const SaveSet rewritten_keep = KeepOnRewrite(keep, rewritten);
  OffloadPlan plan;
  for (const OffloadCopy& copy : rewritten.copies) plan.offloaded.push_back(copy.tensor);
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  sim_options.record_details = false;
  const SimResult sim = Simulate(rewritten.graph, rewritten_keep, sim_options);
  plan.keep.assign(rewritten_keep.begin(), rewritten_keep.begin() + graph.tensors.size());
  plan.peak = sim.peak_bytes;
  plan.recompute_cost = sim.recompute_cost;
  plan.exposed_cost = rewritten.exposed_cost;
  plan.host_peak_bytes = rewritten.host_peak_bytes;
  plan.over_host_budget = rewritten.over_host_budget;
  plan.fits = plan.peak <= options.budget_bytes && !plan.over_host_budget;
  return plan;
}

OffloadPlan PlanOffload(const Graph& graph, const PlannerOptions& options,
                        const OffloadOptions& offload, const PlannerResult& recompute_only) {
  const std::vector<TensorId> eligible = OffloadCandidates(graph);
  OffloadPlan best = MeasureOffloadPlan(graph, recompute_only.keep, {}, offload, options);
  best.method = recompute_only.method;
  if (eligible.empty()) return best;

  std::vector<OffloadPlan> plans;
  plans.push_back(Convert(graph, best, eligible, offload, options));
  const std::vector<TensorId> first = OffloadFirst(graph, eligible, offload, options);
  if (!first.empty()) {
    OffloadPlan offloaded = MeasureOffloadPlan(graph, SaveAll(graph), first, offload, options);
    offloaded.method = "offload first";
    if (!offloaded.fits && !offloaded.over_host_budget) {
      // The recompute planner on the rewritten graph plans the rest.
      OffloadedGraph rewritten = ApplyOffload(graph, first, offload);
      const PlannerResult rest = PlanGraph(rewritten.graph, options);
      SaveSet keep(rest.keep.begin(), rest.keep.begin() + graph.tensors.size());
      offloaded = MeasureOffloadPlan(graph, keep, first, offload, options);
      offloaded.method = "offload first + " + rest.method;
    }
    plans.push_back(Convert(graph, std::move(offloaded), eligible, offload, options));
  }
  for (OffloadPlan& plan : plans) {
    if (Better(plan, best)) best = std::move(plan);
  }
  spdlog::info("offload: {} offloaded, peak {} bytes, recompute cost {}, exposed cost {}",
               best.offloaded.size(), best.peak, best.recompute_cost, best.exposed_cost);
  return best;
}

}  // namespace ckptplan
