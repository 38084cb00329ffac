#include "bench_quality/exhaustive.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ckptplan {

std::vector<FrontPoint> ExhaustiveFront(const Graph& graph, int64_t reserve_bytes) {
  // Pinned candidates (random ops) stay saved, as in every planner.
  const std::vector<TensorId> candidates = DroppableCandidates(graph);
  const size_t k = candidates.size();
  if (k > kMaxExhaustiveCandidates) {
    throw std::invalid_argument("exhaustive search: " + std::to_string(k) + " candidates > " +
                                std::to_string(kMaxExhaustiveCandidates));
  }
  SimOptions options;
  options.reserve_bytes = reserve_bytes;
  struct Point {
    int64_t peak;
    double cost;
    uint32_t mask;
  };
  std::vector<Point> points;
  points.reserve(size_t{1} << k);
  SaveSet keep = SaveAll(graph);
  for (uint32_t mask = 0; mask < (uint32_t{1} << k); ++mask) {
    for (size_t i = 0; i < k; ++i) keep[candidates[i]] = (mask >> i) & 1;
    SimResult sim = Simulate(graph, keep, options);
    points.push_back({sim.peak_bytes, sim.recompute_cost, mask});
  }
  std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    if (a.peak != b.peak) return a.peak < b.peak;
    return a.cost < b.cost;
  });
  std::vector<FrontPoint> front;
  for (const Point& p : points) {
    if (!front.empty() && p.cost >= front.back().recompute_cost) continue;
    FrontPoint point{p.peak, p.cost, SaveAll(graph)};
    for (size_t i = 0; i < k; ++i) point.keep[candidates[i]] = (p.mask >> i) & 1;
    front.push_back(std::move(point));
  }
  return front;
}

const FrontPoint* CheapestUnder(const std::vector<FrontPoint>& front, int64_t budget_bytes) {
  const FrontPoint* best = nullptr;
  for (const FrontPoint& point : front) {
    if (point.peak > budget_bytes) break;
    best = &point;  // later points have lower cost
  }
  return best;
}

}  // namespace ckptplan
