// The in-memory training graph every loader produces.
//
// Index-based: tensors and nodes live in vectors and refer to each other by
// 32-bit ids. Names become ids once, at load; passes keep side vectors indexed
// by id. Nodes are stored in execution order.
#ifndef CKPTPLAN_GRAPH_H_
#define CKPTPLAN_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/base/limits.h"

namespace ckptplan {

using TensorId = uint32_t;
using NodeId = uint32_t;
inline constexpr uint32_t kNoId = UINT32_MAX;

/// What a tensor is, which decides how long the simulator keeps it.
enum class TensorKind : uint8_t {
  kActivation,      ///< made by a node, freed after its last use
  kInput,           ///< the input batch, held by the caller all step
  kParameter,       ///< resident all step
  kBuffer,          ///< resident all step (e.g. BatchNorm running stats)
  kGradient,        ///< parameter gradient: from its producer to the step's end
  kOptimizerState,  ///< resident all step
};

enum class Phase : uint8_t { kForward, kBackward, kOptimizer };

/// A node's part under tensor parallelism (--tp), when the graph says it
/// (JSON "tp"); kAuto leaves it to the structural rule (dist/tensor_parallel.h).
enum class TpRole : uint8_t { kAuto, kColumn, kRow, kReplicated };

std::string_view ToString(TensorKind kind);
std::string_view ToString(Phase phase);
/// Returns false when `name` is not a known kind / phase.
bool ParseTensorKind(std::string_view name, TensorKind* kind);
bool ParsePhase(std::string_view name, Phase* phase);
std::string_view ToString(TpRole role);  ///< "", column, row, replicated
/// Returns false unless `name` is column, row or replicated.
bool ParseTpRole(std::string_view name, TpRole* role);

/// Bytes per element of a dtype name ("float32", "bf16", "int64", ...);
/// 0 when unknown. Sub-byte types are not supported.
uint32_t DtypeBytes(std::string_view dtype);
/// Every dtype name DtypeBytes knows, with its bytes per element, in table
/// order: what the plan file writes for tools that size tensors themselves.
struct DtypeSize {
  std::string_view name;
  uint32_t bytes;
};
const std::vector<DtypeSize>& DtypeSizes();

/// True for an op that draws from a random number generator (dropout,
/// bernoulli_, rand, normal, ...; aten and ONNX spellings, any case,
/// overload suffix ignored). A re-run draws other values, so no plan
/// recomputes one (see SimContext::pinned).
bool IsRandomOp(std::string_view op);

/// An op's base name, as IsRandomOp and IsLinearOp compare it: the aten
/// namespace and overload dropped, lower case, no underscores
/// ("aten.bernoulli_.float" -> "bernoulli", "_to_copy" -> "tocopy").
std::string OpBaseName(std::string_view op);

/// True for a matrix-multiply op that approximate recompute may replace
/// (mm, addmm, matmul, bmm, linear, Gemm; aten and ONNX spellings, any case,
/// overload suffix ignored).
bool IsLinearOp(std::string_view op);

/// True for the ops the parallel layouts insert to move data between ranks
/// (dist/): all_gather, reduce_scatter, all_reduce, pp_recv. What they make
/// (gathered parameters, received activations and gradients) is counted
/// in the `collectives` category.
bool IsCollectiveOp(std::string_view op);

/// True for kinds that live for the whole step whatever the plan.
inline bool IsResidentKind(TensorKind kind) {
  return kind == TensorKind::kInput || kind == TensorKind::kParameter ||
         kind == TensorKind::kBuffer || kind == TensorKind::kOptimizerState;
}

struct Tensor {
  std::string name;
  int64_t bytes = 0;  ///< storage bytes; ignored (storage is shared) for aliases
  TensorKind kind = TensorKind::kActivation;
  TensorId alias_of = kNoId;  ///< tensor whose storage this one shares
  NodeId producer = kNoId;    ///< node that makes it; kNoId for graph inputs
};

/// One way to re-run a linear node approximately in recomputation: its weight
/// replaced by the rank-`rank` truncated SVD (factors refreshed once a step);
/// the forward always runs exactly. Read from a graph's optional "approx"
/// field (docs/approximate-recompute.md).
struct ApproxOption {
  int64_t rank = 0;          ///< >= 1
  double flops = 0;          ///< cost of the approximate node, replacing Node::flops
  double time_us = -1;       ///< -1 when not given
  /// Measured relative error of the step's parameter gradients
  /// (||g_approx - g|| / ||g|| over all parameters) when only this node's
  /// recomputation uses this option.
  double error = 0;
  double output_error = -1;  ///< relative error of the node's output; -1: not given
  /// Memory of the approximate re-run (the simulator counts it, sim/simulator.h):
  /// bytes live only while the node re-runs approximately, beyond its inputs and
  /// outputs (x @ A, the factors' refresh), replacing Node::workspace_bytes at
  /// those re-runs; -1 when not given (the node's own workspace).
  int64_t workspace_bytes = -1;
  /// Bytes the approximation keeps all step, and from step to step, while the
  /// plan approximates the node (its factor basis); 0 when not given.
  int64_t factor_bytes = 0;
};

struct Node {
  std::string name;
  std::string op;
  std::string scope;  ///< module scope, e.g. "h.0/attn"; may be empty
  Phase phase = Phase::kForward;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  double flops = -1;    ///< -1 when not given
  double time_us = -1;  ///< -1 when not given
  int64_t workspace_bytes = 0;  ///< transient bytes live only while it runs
  TpRole tp = TpRole::kAuto;    ///< tensor-parallel part, when the graph gives it
  std::vector<ApproxOption> approx;  ///< by ascending rank; empty: none
};

/// Training state that is not spelled out as tensors in the graph.
struct TrainingState {
  std::string optimizer = "none";  ///< adam, adamw, sgd, sgd_momentum, none
  int64_t parameter_count = 0;     ///< elements over all trainable parameters
  /// Bytes that are not tensors of the graph. Each is added to the sum of the
  /// graph's own tensors of that kind, except that implicit gradients are only
  /// used when the graph holds no gradient tensors.
  int64_t extra_parameter_bytes = 0;
  int64_t extra_buffer_bytes = 0;
  int64_t extra_optimizer_bytes = 0;
  /// Gradient bytes appearing at the first backward node when the graph has no
  /// gradient tensors of its own (parameter_count x gradient dtype size).
  int64_t implicit_gradient_bytes = 0;
  double optimizer_bytes_per_param = 0;  ///< what extra_optimizer_bytes used
  /// How the loader counted bytes per parameter, for the summary; may be empty.
  std::string bytes_per_param_formula;
};

/// Unit of Node cost: microseconds when every costed node has time_us,
/// otherwise FLOPs.
enum class CostUnit : uint8_t { kMicroseconds, kFlops };
std::string_view ToString(CostUnit unit);

struct Graph {
  std::string source;  ///< file it came from, for messages
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;  ///< execution order
  TrainingState training;
  CostUnit cost_unit = CostUnit::kFlops;

  /// Tensor that owns the storage of `t` (follows alias_of to the root).
  TensorId StorageRoot(TensorId t) const;
  /// Cost of running `n` once in cost_unit; 0 when the node has no cost.
  double NodeCost(NodeId n) const;
  /// Cost of re-running `n` with `option` in cost_unit: the option's flops,
  /// or in microseconds its time_us, else the node's time_us scaled by
  /// option flops / node flops; -1 when it cannot be costed in cost_unit.
  double ApproxCost(NodeId n, const ApproxOption& option) const;
  /// Re-derives producers and cost_unit; call after building a graph by hand.
  void Finalize();
};

/// Checks the structural rules every loader must guarantee (ids in range,
/// one producer per tensor, inputs produced before use, resident kinds not
/// produced except as aliases, aliases pointing at an input of the producer,
/// sizes non-negative, costs finite and non-negative, alias chains acyclic)
/// and `limits` (node and tensor counts, total bytes, node cost). Collects
/// every problem and throws InputError naming `graph.source` when there is any.
void ValidateGraph(const Graph& graph, const Limits& limits = Limits());

}  // namespace ckptplan

#endif  // CKPTPLAN_GRAPH_H_
