// Human and machine summaries of a simulation or plan, and the timeline file.
#ifndef CKPTPLAN_REPORT_H_
#define CKPTPLAN_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckptplan/ir/cost.h"
#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// A storage live at some step, for "what is using the memory".
struct LiveTensor {
  TensorId tensor;  ///< storage root
  int64_t bytes;
  Category category;
};
/// The `limit` largest storages live at `step`; ties by tensor id.
std::vector<LiveTensor> LiveAt(const Graph& graph, const SimResult& sim, uint32_t step,
                               size_t limit);

/// What `plan` and `simulate` print.
struct Summary {
  std::string command;  ///< "plan" or "simulate"
  std::string graph_path;
  int64_t budget_bytes = -1;  ///< -1: no budget
  int64_t reserve_bytes = 0;
  const SimResult* save_all = nullptr;
  const SimResult* planned = nullptr;  ///< the plan, or the simulated save set
  const SaveSet* keep = nullptr;
  LowerBound lower_bound;
  size_t top = 10;  ///< tensors to list at the peak
  bool has_plan = true;  ///< false: `planned` is save-all, print it once
  /// Approximate recompute asked for (max error > 0): what was chosen on
  /// `planned`, or why nothing was. nullptr: exact, nothing said.
  const ApproxPlan* approx = nullptr;
};
std::string SummaryText(const Graph& graph, const Summary& summary);
nlohmann::ordered_json SummaryJson(const Graph& graph, const Summary& summary);

/// One row per step with bytes per category (needs record_categories).
nlohmann::ordered_json TimelineJson(const Graph& graph, const SimResult& sim);

}  // namespace ckptplan

#endif  // CKPTPLAN_REPORT_H_
