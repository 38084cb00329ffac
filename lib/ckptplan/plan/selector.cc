#include "ckptplan/plan/selector.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

// How many of the region's nodes sit at the peak.
size_t CountAtPeak(const std::vector<int64_t>& node_peak, const std::vector<int64_t>* offset,
                   int64_t peak) {
  size_t count = 0;
  for (size_t n = 0; n < node_peak.size(); ++n) {
    count += node_peak[n] + (offset ? (*offset)[n] : 0) == peak;
  }
  return count;
}

}  // namespace

bool DropChoice::BetterThan(const DropChoice& other) const {
  if (other.tensor == kNoId) return true;
  if (tier != other.tier) return tier < other.tier;
  if (score != other.score) return score < other.score;
  if (freed != other.freed) return freed > other.freed;
  return tensor < other.tensor;
}

DropChoice ScoreDrop(TensorId t, const RegionDrop& drop) {
  DropChoice choice;
  if (drop.trial_peak > drop.peak) return choice;
  const std::vector<int64_t>& before = *drop.node_peak;
  const std::vector<int64_t>& after = *drop.trial_node_peak;
  double added_cost = std::max(0.0, drop.added_cost);
  if (drop.trial_peak < drop.peak) {
    choice.tier = 0;
    choice.freed = drop.peak - drop.trial_peak;
  } else {
    // Nodes outside the region keep their peaks, so their counts cancel.
    if (CountAtPeak(after, drop.offset, drop.peak) >= CountAtPeak(before, drop.offset, drop.peak)) {
      return choice;
    }
    for (size_t n = 0; n < before.size(); ++n) {
      if (before[n] + (drop.offset ? (*drop.offset)[n] : 0) != drop.peak) continue;
      choice.freed += std::max<int64_t>(0, before[n] - after[n]);
    }
    if (choice.freed <= 0) return choice;
    choice.tier = 1;
  }
  choice.score = added_cost / static_cast<double>(choice.freed);
  choice.tensor = t;
  return choice;
}

DropChoice ScoreDrop(TensorId t, const SimResult& current, const SimResult& trial) {
  RegionDrop drop;
  drop.peak = current.peak_bytes;
  drop.trial_peak = trial.peak_bytes;
  drop.added_cost = trial.recompute_cost - current.recompute_cost;
  drop.node_peak = &current.node_peak;
  drop.trial_node_peak = &trial.node_peak;
  return ScoreDrop(t, drop);
}

GreedyResult GreedyPlan(const Graph& graph, const SaveSet& start,
                        const GreedyOptions& options) {
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  GreedyResult result;
  result.keep = start;
  SimResult current = Simulate(graph, result.keep, sim_options);
  result.start_peak = current.peak_bytes;
  const std::vector<TensorId> candidates = DroppableCandidates(graph);
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
