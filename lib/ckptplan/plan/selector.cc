#include "ckptplan/base/text_escape.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
#include <algorithm>
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
#include <spdlog/spdlog.h>
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
namespace ckptplan {
#include "ckptplan/base/text_escape.h"
namespace {
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
// How many of the region's nodes sit at the peak.
#include "ckptplan/base/text_escape.h"
size_t CountAtPeak(const std::vector<int64_t>& node_peak, const std::vector<int64_t>* offset,
#include "ckptplan/base/text_escape.h"
                   int64_t peak) {
#include "ckptplan/base/text_escape.h"
  size_t count = 0;
#include "ckptplan/base/text_escape.h"
  for (size_t n = 0; n < node_peak.size(); ++n) {
#include "ckptplan/base/text_escape.h"
    count += node_peak[n] + (offset ? (*offset)[n] : 0) == peak;
#include "ckptplan/base/text_escape.h"
  }
#include "ckptplan/base/text_escape.h"
  return count;
#include "ckptplan/base/text_escape.h"
}
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
}  // namespace
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
bool DropChoice::BetterThan(const DropChoice& other) const {
#include "ckptplan/base/text_escape.h"
  if (other.tensor == kNoId) return true;
#include "ckptplan/base/text_escape.h"
  if (tier != other.tier) return tier < other.tier;
#include "ckptplan/base/text_escape.h"
  if (score != other.score) return score < other.score;
#include "ckptplan/base/text_escape.h"
  if (freed != other.freed) return freed > other.freed;
#include "ckptplan/base/text_escape.h"
  return tensor < other.tensor;
#include "ckptplan/base/text_escape.h"
}
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
DropChoice ScoreDrop(TensorId t, const RegionDrop& drop) {
#include "ckptplan/base/text_escape.h"
  DropChoice choice;
#include "ckptplan/base/text_escape.h"
  if (drop.trial_peak > drop.peak) return choice;
#include "ckptplan/base/text_escape.h"
  const std::vector<int64_t>& before = *drop.node_peak;
#include "ckptplan/base/text_escape.h"
  const std::vector<int64_t>& after = *drop.trial_node_peak;
#include "ckptplan/base/text_escape.h"
  double added_cost = std::max(0.0, drop.added_cost);
#include "ckptplan/base/text_escape.h"
  if (drop.trial_peak < drop.peak) {
#include "ckptplan/base/text_escape.h"
    choice.tier = 0;
#include "ckptplan/base/text_escape.h"
    choice.freed = drop.peak - drop.trial_peak;
#include "ckptplan/base/text_escape.h"
  } else {
#include "ckptplan/base/text_escape.h"
    // Nodes outside the region keep their peaks, so their counts cancel.
#include "ckptplan/base/text_escape.h"
    if (CountAtPeak(after, drop.offset, drop.peak) >= CountAtPeak(before, drop.offset, drop.peak)) {
#include "ckptplan/base/text_escape.h"
      return choice;
#include "ckptplan/base/text_escape.h"
    }
#include "ckptplan/base/text_escape.h"
    for (size_t n = 0; n < before.size(); ++n) {
#include "ckptplan/base/text_escape.h"
      if (before[n] + (drop.offset ? (*drop.offset)[n] : 0) != drop.peak) continue;
#include "ckptplan/base/text_escape.h"
      choice.freed += std::max<int64_t>(0, before[n] - after[n]);
#include "ckptplan/base/text_escape.h"
    }
#include "ckptplan/base/text_escape.h"
    if (choice.freed <= 0) return choice;
#include "ckptplan/base/text_escape.h"
    choice.tier = 1;
#include "ckptplan/base/text_escape.h"
  }
#include "ckptplan/base/text_escape.h"
  choice.score = added_cost / static_cast<double>(choice.freed);
#include "ckptplan/base/text_escape.h"
  choice.tensor = t;
#include "ckptplan/base/text_escape.h"
  return choice;
#include "ckptplan/base/text_escape.h"
}
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
DropChoice ScoreDrop(TensorId t, const SimResult& current, const SimResult& trial) {
#include "ckptplan/base/text_escape.h"
  RegionDrop drop;
#include "ckptplan/base/text_escape.h"
  drop.peak = current.peak_bytes;
#include "ckptplan/base/text_escape.h"
  drop.trial_peak = trial.peak_bytes;
#include "ckptplan/base/text_escape.h"
  drop.added_cost = trial.recompute_cost - current.recompute_cost;
#include "ckptplan/base/text_escape.h"
  drop.node_peak = &current.node_peak;
#include "ckptplan/base/text_escape.h"
  drop.trial_node_peak = &trial.node_peak;
#include "ckptplan/base/text_escape.h"
  return ScoreDrop(t, drop);
#include "ckptplan/base/text_escape.h"
}
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
GreedyResult GreedyPlan(const Graph& graph, const SaveSet& start,
#include "ckptplan/base/text_escape.h"
                        const GreedyOptions& options) {
#include "ckptplan/base/text_escape.h"
  SimOptions sim_options;
#include "ckptplan/base/text_escape.h"
  sim_options.reserve_bytes = options.reserve_bytes;
#include "ckptplan/base/text_escape.h"
  GreedyResult result;
#include "ckptplan/base/text_escape.h"
  result.keep = start;
#include "ckptplan/base/text_escape.h"
  SimResult current = Simulate(graph, result.keep, sim_options);
#include "ckptplan/base/text_escape.h"
  result.start_peak = current.peak_bytes;
#include "ckptplan/base/text_escape.h"
  const std::vector<TensorId> candidates = SaveCandidates(graph);
#include "ckptplan/base/text_escape.h"
  while (current.peak_bytes > options.budget_bytes) {
#include "ckptplan/base/text_escape.h"
    DropChoice best;
#include "ckptplan/base/text_escape.h"
    SimResult best_sim;
#include "ckptplan/base/text_escape.h"
    for (TensorId t : candidates) {
#include "ckptplan/base/text_escape.h"
      if (!result.keep[t]) continue;
#include "ckptplan/base/text_escape.h"
      result.keep[t] = 0;
#include "ckptplan/base/text_escape.h"
      SimResult trial = Simulate(graph, result.keep, sim_options);
#include "ckptplan/base/text_escape.h"
      result.keep[t] = 1;
#include "ckptplan/base/text_escape.h"
      DropChoice choice = ScoreDrop(t, current, trial);
#include "ckptplan/base/text_escape.h"
      if (choice.tensor != kNoId && choice.BetterThan(best)) {
#include "ckptplan/base/text_escape.h"
        best = choice;
#include "ckptplan/base/text_escape.h"
        best_sim = std::move(trial);
#include "ckptplan/base/text_escape.h"
      }
#include "ckptplan/base/text_escape.h"
    }
#include "ckptplan/base/text_escape.h"
    if (best.tensor == kNoId) break;
#include "ckptplan/base/text_escape.h"
    spdlog::debug("greedy: drop '{}' (peak {} -> {}, cost +{})", ShowName(graph.tensors[best.tensor].name),
#include "ckptplan/base/text_escape.h"
                  current.peak_bytes, best_sim.peak_bytes,
#include "ckptplan/base/text_escape.h"
                  best_sim.recompute_cost - current.recompute_cost);
#include "ckptplan/base/text_escape.h"
    result.keep[best.tensor] = 0;
#include "ckptplan/base/text_escape.h"
    result.drops.push_back(best.tensor);
#include "ckptplan/base/text_escape.h"
    current = std::move(best_sim);
#include "ckptplan/base/text_escape.h"
  }
#include "ckptplan/base/text_escape.h"
  result.peak = current.peak_bytes;
#include "ckptplan/base/text_escape.h"
  result.recompute_cost = current.recompute_cost;
#include "ckptplan/base/text_escape.h"
  result.fits = current.peak_bytes <= options.budget_bytes;
#include "ckptplan/base/text_escape.h"
  spdlog::info("greedy: {} drops, peak {} -> {} bytes (budget {}), {}", result.drops.size(),
#include "ckptplan/base/text_escape.h"
               result.start_peak, result.peak, options.budget_bytes,
#include "ckptplan/base/text_escape.h"
               result.fits ? "fits" : "does not fit");
#include "ckptplan/base/text_escape.h"
  return result;
#include "ckptplan/base/text_escape.h"
}
#include "ckptplan/base/text_escape.h"

#include "ckptplan/base/text_escape.h"
}  // namespace ckptplan
