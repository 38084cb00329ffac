#include "ckptplan/cleanup.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "ckptplan/console.h"
#include "ckptplan/regions.h"

namespace ckptplan {
namespace {

struct Gain {
  TensorId tensor;
  double saved_cost;  // recompute cost removed by re-saving it
};

}  // namespace

CleanupResult ResaveDropped(const Graph& graph, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes) {
  return ResaveDropped(SimContext(graph), keep, budget_bytes, reserve_bytes);
}

CleanupResult ResaveDropped(const SimContext& context, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes) {
  const Graph& graph = context.graph;
  const auto started = std::chrono::steady_clock::now();
  SimOptions options;
  options.reserve_bytes = reserve_bytes;
  CleanupResult result;
  result.keep = keep;
  // Each try re-simulates only the region of the tensor re-saved.
  RegionalMemory memory(context, result.keep, options);
  result.peak_before = memory.start_peak();
  result.cost_before = memory.start_cost();
  RegionalMemory::Trial trial;
  bool changed = memory.peak() <= budget_bytes;
  // While the plan fits, a re-save fits when its own region stays within the
  // budget: a region no re-save changed in a round has none in the next.
  std::vector<uint8_t> region_changed(memory.size(), 1);
  size_t rounds = 0;
  while (changed) {
    changed = false;
    ++rounds;
    // Rank the dropped candidates by the recompute a re-save removes.
    std::vector<Gain> gains;
    for (TensorId t : context.candidates) {
      if (result.keep[t] || !region_changed[memory.RegionOf(t)]) continue;
      result.keep[t] = 1;
      memory.Try(memory.RegionOf(t), result.keep, &trial, /*need_sim=*/false);
      result.keep[t] = 0;
      if (trial.peak > budget_bytes) continue;
      gains.push_back({t, -trial.added_cost});
    }
    std::sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) {
      if (a.saved_cost != b.saved_cost) return a.saved_cost > b.saved_cost;
      return a.tensor < b.tensor;
    });
    std::fill(region_changed.begin(), region_changed.end(), 0);
    for (const Gain& gain : gains) {
      result.keep[gain.tensor] = 1;
      memory.Try(memory.RegionOf(gain.tensor), result.keep, &trial);
      // Keep a re-save only if it still fits and does not add recompute
      // (re-saving can only remove recompute steps, so this guards ties).
      if (trial.peak > budget_bytes || trial.added_cost > 0) {
        result.keep[gain.tensor] = 0;
        continue;
      }
      spdlog::debug("cleanup: re-save '{}' (cost {:+})", graph.tensors[gain.tensor].name,
                    trial.added_cost);
      result.resaved.push_back(gain.tensor);
      region_changed[trial.region] = 1;
      memory.Apply(&trial);
      changed = true;
    }
  }
  // The regions' figures are the step's (exactly: see RegionalMemory).
  result.peak_after = memory.peak();
  result.cost_after = memory.cost();
  spdlog::info("cleanup: {} re-saved in {} rounds, recompute cost {} -> {}, peak {} -> {} bytes "
               "({:.3f} s)",
               result.resaved.size(), rounds, result.cost_before, result.cost_after,
               result.peak_before, result.peak_after,
               SecondsSince(started));
  return result;
}

}  // namespace ckptplan
