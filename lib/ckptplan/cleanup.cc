#include "ckptplan/cleanup.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

struct Gain {
  TensorId tensor;
  double saved_cost;  // recompute cost removed by re-saving it
};

}  // namespace

CleanupResult ResaveDropped(const Graph& graph, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes) {
  SimOptions options;
  options.reserve_bytes = reserve_bytes;
  CleanupResult result;
  result.keep = keep;
  SimResult current = Simulate(graph, result.keep, options);
  result.peak_before = current.peak_bytes;
  result.cost_before = current.recompute_cost;
  const std::vector<TensorId> candidates = SaveCandidates(graph);
  bool changed = current.peak_bytes <= budget_bytes;
  while (changed) {
    changed = false;
    // Rank the dropped candidates by the recompute a re-save removes.
    std::vector<Gain> gains;
    for (TensorId t : candidates) {
      if (result.keep[t]) continue;
      result.keep[t] = 1;
      SimResult trial = Simulate(graph, result.keep, options);
      result.keep[t] = 0;
      if (trial.peak_bytes > budget_bytes) continue;
      gains.push_back({t, current.recompute_cost - trial.recompute_cost});
    }
    std::sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) {
      if (a.saved_cost != b.saved_cost) return a.saved_cost > b.saved_cost;
      return a.tensor < b.tensor;
    });
    for (const Gain& gain : gains) {
      result.keep[gain.tensor] = 1;
      SimResult trial = Simulate(graph, result.keep, options);
      // Keep a re-save only if it still fits and does not add recompute
      // (re-saving can only remove recompute steps, so this guards ties).
      if (trial.peak_bytes > budget_bytes || trial.recompute_cost > current.recompute_cost) {
        result.keep[gain.tensor] = 0;
        continue;
      }
      spdlog::debug("cleanup: re-save '{}' (cost {} -> {})", graph.tensors[gain.tensor].name,
                    current.recompute_cost, trial.recompute_cost);
      result.resaved.push_back(gain.tensor);
      current = std::move(trial);
      changed = true;
    }
  }
  result.peak_after = current.peak_bytes;
  result.cost_after = current.recompute_cost;
  spdlog::info("cleanup: {} re-saved, recompute cost {} -> {}, peak {} -> {} bytes",
               result.resaved.size(), result.cost_before, result.cost_after, result.peak_before,
               result.peak_after);
  return result;
}

}  // namespace ckptplan
