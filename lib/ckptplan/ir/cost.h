// How node costs and recompute overheads are written, everywhere ckptplan
// prints them (summaries, sweeps, reports, exports, check).
#ifndef CKPTPLAN_COST_H_
#define CKPTPLAN_COST_H_

#include <string>

#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// A cost in `unit`: "12.5 us", or FLOPs with a decimal prefix ("3.4 GFLOP").
std::string CostText(CostUnit unit, double cost);

/// 100 * part / whole: the recompute overhead as a percentage of the step's
/// cost, or any other share; 0 when whole <= 0 (a step that costs nothing).
double Percent(double part, double whole);

/// Percent with two decimals: "12.34%".
std::string PercentText(double part, double whole);

}  // namespace ckptplan

#endif  // CKPTPLAN_COST_H_
