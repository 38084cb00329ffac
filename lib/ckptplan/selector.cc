#include "ckptplan/selector.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

// How many original nodes sit at the peak.
size_t CountAtPeak(const SimResult& sim) {
  return static_cast<size_t>(
      std::count(sim.node_peak.begin(), sim.node_peak.end(), sim.peak_bytes));
}

}  // namespace

bool DropChoice::BetterThan(const DropChoice& other) const {
  if (other.tensor == kNoId) return true;
  if (tier != other.tier) return tier < other.tier;
  if (score != other.score) return score < other.score;
  if (freed != other.freed) return freed > other.freed;
  return tensor < other.tensor;
}

DropChoice ScoreDrop(TensorId t, const SimResult& current, const SimResult& trial) {
  DropChoice choice;
  if (trial.peak_bytes > current.peak_bytes) return choice;
  double added_cost = std::max(0.0, trial.recompute_cost - current.recompute_cost);
  if (trial.peak_bytes < current.peak_bytes) {
    choice.tier = 0;
    choice.freed = current.peak_bytes - trial.peak_bytes;
  } else {
    if (CountAtPeak(trial) >= CountAtPeak(current)) return choice;
    for (size_t n = 0; n < current.node_peak.size(); ++n) {
      if (current.node_peak[n] != current.peak_bytes) continue;
      choice.freed += std::max<int64_t>(0, current.node_peak[n] - trial.node_peak[n]);
    }
    if (choice.freed <= 0) return choice;
    choice.tier = 1;
  }
  choice.score = added_cost / static_cast<double>(choice.freed);
  choice.tensor = t;
  return choice;
}

GreedyResult GreedyPlan(const Graph& graph, const SaveSet& start,
                        const GreedyOptions& options) {
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  GreedyResult result;
  result.keep = start;
  SimResult current = Simulate(graph, result.keep, sim_options);
  result.start_peak = current.peak_bytes;
  const std::vector<TensorId> candidates = SaveCandidates(graph);
  while (current.peak_bytes > options.budget_bytes) {
    DropChoice best;
    SimResult best_sim;
    for (TensorId t : candidates) {
      if (!result.keep[t]) continue;
      result.keep[t] = 0;
      SimResult trial = Simulate(graph, result.keep, sim_options);
      result.keep[t] = 1;
      DropChoice choice = ScoreDrop(t, current, trial);
      if (choice.tensor != kNoId && choice.BetterThan(best)) {
        best = choice;
        best_sim = std::move(trial);
      }
    }
    if (best.tensor == kNoId) break;
    spdlog::debug("greedy: drop '{}' (peak {} -> {}, cost +{})", graph.tensors[best.tensor].name,
                  current.peak_bytes, best_sim.peak_bytes,
                  best_sim.recompute_cost - current.recompute_cost);
    result.keep[best.tensor] = 0;
    result.drops.push_back(best.tensor);
    current = std::move(best_sim);
  }
  result.peak = current.peak_bytes;
  result.recompute_cost = current.recompute_cost;
  result.fits = current.peak_bytes <= options.budget_bytes;
  spdlog::info("greedy: {} drops, peak {} -> {} bytes (budget {}), {}", result.drops.size(),
               result.start_peak, result.peak, options.budget_bytes,
               result.fits ? "fits" : "does not fit");
  return result;
}

}  // namespace ckptplan
