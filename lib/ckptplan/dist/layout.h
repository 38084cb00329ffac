// The parallel layout of a training run, and the transform from the graph of
// one microbatch on one device to one graph per distinct rank.
//
// The transform is additive: it rewrites tensor sizes and inserts nodes and
// tensors (collective buffers) so that the simulator's one memory rule,
// applied unchanged to a rank's graph, gives that rank's memory. It never
// changes how memory is counted.
#ifndef CKPTPLAN_DIST_LAYOUT_H_
#define CKPTPLAN_DIST_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// What the --dp ... --pp flags say. The defaults are one device.
struct ParallelLayout {
  int dp = 1;    ///< data-parallel ranks
  int zero = 0;  ///< 0 replicated (DDP), 1 optimizer state, 2 + gradients, 3 + parameters
  /// How ZeRO shards: "flat" (DeepSpeed and FSDP: one flat buffer cut in dp
  /// equal, padded parts) or "params" (torch's ZeroRedundancyOptimizer: whole
  /// parameters, largest first, each to the rank holding the fewest bytes).
  std::string zero_partition = "flat";
  std::string grad_buckets = "copy";  ///< DDP: copy (default) or view (gradient_as_bucket_view)
  int64_t bucket_cap_bytes = 25ll << 20;  ///< DDP bucket_cap_mb, in bytes
  int tp = 1;
  bool sp = false;
  std::string tp_embedding = "vocab";
  int pp = 1;
  int microbatches = 1;
  std::string schedule = "1f1b";
  int virtual_stages = 1;
  bool pp_free_outputs = false;

  /// How messages name a field, given as the plan file's "parallel" object
  /// spells it ("dp", "zero_partition", "bucket_cap_bytes"); the CLI names
  /// its flags. Unset: that spelling.
  std::function<std::string(const std::string& field)> field_name;

  /// True when every flag is at its default: plan the graph as it is.
  bool IsSingleDevice() const;
  /// `field` as messages name it (field_name).
  std::string Name(const std::string& field) const {
    return field_name ? field_name(field) : field;
  }
};

/// Throws InputError (kExitUsage) naming the field (ParallelLayout::Name)
/// when a value is out of range or a combination is not supported.
void ValidateLayout(const ParallelLayout& layout);

/// One distinct rank: its coordinates and how many ranks share its graph.
struct RankGraph {
  int pp_stage = 0;
  int tp_rank = 0;
  int dp_rank = 0;  ///< the first data-parallel rank with this graph
  int count = 1;    ///< ranks whose graph this is
  Graph graph;
};

/// The graph of every distinct rank, ordered by (pp_stage, tp_rank,
/// dp_rank). Ranks of one stage have the same tensor and node ids, so one
/// save set applies to all of them. Throws InputError for a layout the graph
/// cannot take (e.g. a dp rank with no parameters under --zero-partition params).
std::vector<RankGraph> DistributeGraph(const Graph& graph, const ParallelLayout& layout);

/// Bytes of each data-parallel rank's share of `total` parameter-proportional
/// bytes. "flat": ceil(total / dp) on every rank (DeepSpeed pads the flat
/// buffer to a multiple of dp). "params": each rank's part in proportion to
/// the parameter bytes ZeroRedundancyOptimizer gives it.
struct ShardPlan {
  /// Per dp rank, the parameter storage roots it owns ("params"); empty
  /// vectors for "flat".
  std::vector<std::vector<TensorId>> owned;
  std::vector<int64_t> owned_bytes;  ///< per dp rank; "flat": ceil(total / dp)
  int64_t total_bytes = 0;           ///< all parameter bytes
};
/// The module unit of a scope: its first component, and the second too when
/// that is a layer index ("h.0/attn" and "/h.0/attn/MatMul" are "h.0", "wte"
/// is "wte", "" is ""). FSDP wraps units; pipelines split layers.
std::string ModuleUnit(const std::string& scope);

/// Per tensor, the parameter an optimizer-state root belongs to, by name
/// ("<parameter>.<state>": exp_avg, exp_avg_sq, step, momentum_buffer, as
/// scripts/export_torch.py and ONNX Runtime name them); kNoId for other
/// tensors and for state that names no parameter.
std::vector<TensorId> OptimizerStateOwners(const Graph& graph);

/// Assigns parameters to `dp` ranks as `partition` says.
ShardPlan PlanShards(const Graph& graph, int dp, const std::string& partition);

}  // namespace ckptplan

#endif  // CKPTPLAN_DIST_LAYOUT_H_
