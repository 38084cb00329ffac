// Plans written in the terms other frameworks take (REFERENCE.md "Where plans
// go"). PyTorch selective checkpointing and JAX name policies take a save set
// as is; Megatron, TorchTitan and DeepSpeed only recompute whole modules or
// layers, so the plan is rounded to the expressible plan that fits the budget
// with the least recompute cost, re-simulated with Simulate().
//
// Module structure comes from node scopes ("h.0/attn/c_attn"): a layer is
// ScopeLayer's (ir/scope.h), the prefix up to the deepest numbered component; a module's
// internal tensors are the candidates its forward nodes make that no forward
// node outside it reads (its outputs stay saved, as checkpointing keeps the
// next module's input).
#ifndef CKPTPLAN_EXPORT_H_
#define CKPTPLAN_EXPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

enum class ExportTarget : uint8_t { kPytorchSac, kJax, kMegatron, kTorchTitan, kDeepSpeed };
/// "pytorch-sac", "jax", "megatron", "torchtitan", "deepspeed".
bool ParseExportTarget(std::string_view name, ExportTarget* target);
std::string_view ToString(ExportTarget target);

/// A save set (and what it offloads) and what it costs, simulated; with
/// offloads, on the graph ApplyOffload rewrites.
struct Expressed {
  std::string label;  ///< the framework settings, e.g. "mode = \"full\""
  SaveSet keep;       ///< offloaded tensors: 0 here, as a plan file reads
  std::vector<TensorId> offloaded;  ///< ascending ids
  int64_t peak_bytes = 0;
  double recompute_cost = 0;
  double exposed_cost = 0;     ///< the copies' exposed time, in cost units
  bool over_host_budget = false;  ///< its offloads exceed the host budget
  size_t dropped = 0;  ///< candidates recomputed
  std::vector<std::string> modules;  ///< DeepSpeed: module names to wrap
};

struct ExportInput {
  std::string plan_path;  ///< for the header of the written file
  SaveSet keep;           ///< the plan
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  /// Tensors the plan offloads (ascending ids; `keep` is 0 for them) and how
  /// its copies are timed. Exact targets write them (JAX's
  /// save_and_offload_only_these_names); the others round them to what they
  /// express (Megatron's --offload-modules; PyTorch's selective checkpointing
  /// has no offload policy: saved or recomputed).
  std::vector<TensorId> offloaded;
  OffloadOptions offload;
  /// The plan's approximations evaluated on its save set; nullptr or none:
  /// an exact plan. No target runs recomputation approximately: the file
  /// says so and recomputes exactly.
  const ApproxPlan* approx = nullptr;
};

struct ExportResult {
  std::string text;   ///< what the framework reads; ends in a newline
  bool exact = true;  ///< the framework takes the plan's save set as is
  Expressed plan;     ///< the plan as given
  Expressed chosen;   ///< the plan the text expresses
  std::string report;  ///< one line per fact, for the user
};

/// Writes `input`'s plan for `target`. Throws InfeasibleError when the
/// target can express no plan that fits the budget (the message gives the
/// closest one's peak), InputError when the graph has no scopes the target
/// needs.
ExportResult ExportPlan(const Graph& graph, const ExportInput& input, ExportTarget target);

}  // namespace ckptplan

#endif  // CKPTPLAN_EXPORT_H_
