// What `sweep` prints: the trade-off curve RunSweep (plan/sweep.h) found.
#ifndef CKPTPLAN_SWEEP_REPORT_H_
#define CKPTPLAN_SWEEP_REPORT_H_

#include <string>

#include <nlohmann/json.hpp>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/sweep.h"

namespace ckptplan {

/// Table: budget, peak, recompute cost and % of the step, feasible, method.
std::string SweepText(const Graph& graph, const std::string& graph_path, const SweepResult& sweep);
nlohmann::ordered_json SweepJson(const Graph& graph, const std::string& graph_path,
                                 const SweepResult& sweep);

}  // namespace ckptplan

#endif  // CKPTPLAN_SWEEP_REPORT_H_
