// The plan file (schemas/plan.schema.json): what other tools import.
#ifndef CKPTPLAN_PLAN_IO_H_
#define CKPTPLAN_PLAN_IO_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// One save-or-recompute decision per candidate, in tensor id order.
struct Decision {
  TensorId tensor;
  bool recompute;
  int64_t bytes;               ///< storage bytes of the tensor's root
  double recompute_cost;       ///< cost of the chain its first use ran; 0 if saved
  std::vector<NodeId> chain;   ///< nodes re-run for it, in order
};
std::vector<Decision> MakeDecisions(const Graph& graph, const SaveSet& keep,
                                    const SimResult& planned);

/// Everything the plan file records.
struct PlanRecord {
  std::string graph_path;
  std::string graph_sha256;
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  std::string start;  ///< start set the selector began from
  const SimResult* save_all = nullptr;
  const SimResult* planned = nullptr;
  const SaveSet* keep = nullptr;
  LowerBound lower_bound;
};
nlohmann::ordered_json PlanToJson(const Graph& graph, const PlanRecord& record);

/// Peak breakdown at `step` as a JSON object keyed by category name.
nlohmann::ordered_json BreakdownJson(const SimResult& sim, uint32_t step);

/// What a plan file says, resolved against `graph`.
struct LoadedPlan {
  SaveSet keep;
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  int64_t predicted_peak_bytes = 0;
  std::string graph_sha256;
};
/// Reads a plan file for `graph`. Every tensor it names must be a candidate
/// of `graph`; candidates it does not name are saved. Throws InputError
/// naming the file and the tensor.
LoadedPlan ReadPlan(const Graph& graph, const std::string& path);
/// ReadPlan on text already read; `source` names it in messages.
LoadedPlan ParsePlan(const Graph& graph, std::string_view text, const std::string& source);

}  // namespace ckptplan

#endif  // CKPTPLAN_PLAN_IO_H_
