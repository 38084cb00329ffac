// The plan file (schemas/plan.schema.json): what other tools import.
#ifndef CKPTPLAN_PLAN_IO_H_
#define CKPTPLAN_PLAN_IO_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckptplan/base/problems.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// One save-or-recompute decision per candidate, in tensor id order.
struct Decision {
  TensorId tensor;
  bool recompute;
  int64_t bytes;               ///< storage bytes of the tensor's root
  double recompute_cost;       ///< cost of the chain its first use ran; 0 if saved
  std::vector<NodeId> chain;   ///< nodes re-run for it, in order
  /// The chain re-runs a node `approx` approximates ("recompute_approx");
  /// recompute_cost is then the chain's cost with the approximations.
  bool approximate = false;
};
/// `approx` (may be nullptr) is the plan's approximations (approx_planner.h).
std::vector<Decision> MakeDecisions(const Graph& graph, const SaveSet& keep,
                                    const SimResult& planned, const ApproxPlan* approx = nullptr);

/// How offloaded tensors were timed (sim/offload.h): what simulate --plan
/// needs to rewrite the graph the same way.
struct OffloadSettings {
  HostLink link;
  double flops_per_us = 0;  ///< compute rate for nodes without time_us
  std::optional<int64_t> host_budget_bytes;
};

/// The copies' timing `settings` imply for `graph` (the same whether the
/// planner or a reader of its plan file times them).
OffloadOptions TimeOffloads(const Graph& graph, const OffloadSettings& settings);

/// Everything the plan file records.
struct PlanRecord {
  std::string graph_path;
  std::string graph_sha256;
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  std::string start;  ///< start set the selector began from
  /// Settings the graph was loaded with, written as "load" (limits are not);
  /// nullptr: none (a JSON graph carries its own).
  const LoadOptions* load = nullptr;
  const SimResult* save_all = nullptr;
  const SimResult* planned = nullptr;
  const SaveSet* keep = nullptr;
  LowerBound lower_bound;
  /// With offloaded tensors: the graph PlanToJson is given is `offloaded`'s
  /// rewrite, `planned` its simulation, and `offload_settings` how it was timed.
  const OffloadedGraph* offloaded = nullptr;
  const OffloadSettings* offload_settings = nullptr;
  /// The approximations chosen on `planned` (nullptr or none chosen: an
  /// exact plan, written without any approximation field).
  const ApproxPlan* approx = nullptr;
};
nlohmann::ordered_json PlanToJson(const Graph& graph, const PlanRecord& record);

/// Peak breakdown at `step` as a JSON object keyed by category name.
nlohmann::ordered_json BreakdownJson(const SimResult& sim, uint32_t step);

/// The "load" object of plan files and check configs: dims, input_shapes,
/// frozen, precision, optimizer, device (not the limits).
nlohmann::ordered_json LoadJson(const LoadOptions& load);
/// Reads a "load" object; each problem, prefixed with `where` (e.g.
/// "\"load\"."), goes to `problems`. Absent fields keep their defaults.
LoadOptions ParseLoadJson(const nlohmann::json& load, const std::string& where,
                          Problems* problems);

/// What a plan file says before any graph is loaded: the graph to load and
/// how (so `export` and `simulate --plan` rebuild the graph it was made on).
struct PlanHeader {
  std::string graph_file;  ///< "graph"."file"; empty when absent
  /// The "load" object (default limits), when the plan records one.
  std::optional<LoadOptions> load;
};
/// Reads the header of the plan file at `path`. Throws InputError naming the
/// file and the field when "load" is malformed, IoError when unreadable.
PlanHeader ReadPlanHeader(const std::string& path);
/// ReadPlanHeader on text already read; `source` names it in messages.
PlanHeader ParsePlanHeader(std::string_view text, const std::string& source);

/// What a plan file says, resolved against `graph`.
struct LoadedPlan {
  SaveSet keep;
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  int64_t predicted_peak_bytes = 0;
  std::string graph_sha256;
  std::vector<TensorId> offloaded;  ///< ascending ids; empty: no offload
  OffloadSettings offload;          ///< how they were timed, when any
  /// "approximations": (node, option index into its approx) by node id;
  /// empty: an exact plan. max_error and estimated_error as recorded.
  std::vector<std::pair<NodeId, size_t>> approximations;
  double max_error = 0;
  double estimated_error = 0;
};
/// Reads a plan file for `graph`. Every tensor it names must be a candidate
/// of `graph`; candidates it does not name are saved; "recompute_approx"
/// reads as "recompute". Every approximation must name a node of `graph`
/// and one of its approx ranks. Throws InputError
/// naming the file and the tensor.
LoadedPlan ReadPlan(const Graph& graph, const std::string& path);
/// ReadPlan on text already read; `source` names it in messages.
LoadedPlan ParsePlan(const Graph& graph, std::string_view text, const std::string& source);

}  // namespace ckptplan

#endif  // CKPTPLAN_PLAN_IO_H_
