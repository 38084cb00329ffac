// The exact optimum under ckptplan's own memory model, for small graphs:
// every subset of the save candidates is simulated once, and the Pareto
// front of (peak, recompute cost) answers every budget.
#ifndef CKPTPLAN_EXHAUSTIVE_H_
#define CKPTPLAN_EXHAUSTIVE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

struct FrontPoint {
  int64_t peak = 0;  ///< bytes
  double recompute_cost = 0;
  SaveSet keep;
};

/// Largest candidate count ExhaustiveFront accepts (2^20 simulations).
inline constexpr size_t kMaxExhaustiveCandidates = 20;

/// Pareto front over all 2^k save sets, sorted by peak ascending (cost then
/// strictly descending); among equal (peak, cost) the set met first in
/// enumeration order (saved-bit mask counting up). Throws std::invalid_argument
/// when the graph has more than kMaxExhaustiveCandidates candidates.
std::vector<FrontPoint> ExhaustiveFront(const Graph& graph, int64_t reserve_bytes);

/// The cheapest point with peak <= budget, or nullptr when none fits.
const FrontPoint* CheapestUnder(const std::vector<FrontPoint>& front, int64_t budget_bytes);

}  // namespace ckptplan

#endif  // CKPTPLAN_EXHAUSTIVE_H_
