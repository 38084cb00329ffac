// Offload: a saved activation leaves the device after it is made and comes
// back before its first backward use.
//
// An offloaded tensor's device storage is freed at the end of the step in
// which its copy to host completes (not before its last forward read), and
// allocated again at the start of the step in which its copy back starts;
// the backward reads that copy. Copies run on one copy engine per direction,
// beside compute, in order (copies out by the time their tensor is made,
// copies back by their deadline); a copy takes bytes / link bandwidth. A copy
// back is started as late as still finishes before its first backward reader,
// never before the backward begins nor before its copy out completed. The
// time a step waits for a copy is exposed: it is added to the step's cost.
//
// The rule is applied by rewriting the graph (ApplyOffload), so that the
// simulator's one memory rule measures offload plans too: after the step
// where a copy out completes, a node "offload-wait" reads the tensor (its
// storage lives to there and no longer); before the step where the copy back
// starts, a backward node "reload" makes the copy, which the backward reads
// instead. Recompute steps are not timed: the model times the original nodes.
#ifndef CKPTPLAN_OFFLOAD_H_
#define CKPTPLAN_OFFLOAD_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// The device-host link, bytes per second in each direction.
struct HostLink {
  double to_host_bytes_per_s = 0;
  double to_device_bytes_per_s = 0;
};

struct OffloadOptions {
  HostLink link;
  /// Compute time of each original node, microseconds (NodeTimes).
  std::vector<double> node_time_us;
  /// Cost units per microsecond of exposed time: 1 when the graph's costs are
  /// microseconds, the compute rate in FLOP per microsecond when they are FLOPs.
  double cost_per_us = 1;
  /// Host bytes the offloaded tensors may hold at once; unset: unlimited.
  std::optional<int64_t> host_budget_bytes;
};

/// Each node's compute time: its time_us when given, else flops /
/// flops_per_us, else 0.
std::vector<double> NodeTimes(const Graph& graph, double flops_per_us);

/// Host bytes a pinned buffer of `bytes` takes: PyTorch's CUDA host
/// allocator rounds every block up to a power of two.
int64_t PinnedHostBytes(int64_t bytes);

/// True when `t` can be offloaded: a candidate (SaveCandidates) that owns its
/// storage, of more than 0 bytes, made by a forward node, and the only tensor
/// of that storage that a non-forward node reads.
bool CanOffload(const Graph& graph, TensorId t);
/// Every candidate CanOffload holds for, ascending id, in one pass.
std::vector<TensorId> OffloadCandidates(const Graph& graph);

/// One offloaded tensor's copies. Times are microseconds from the start of the
/// step on the compute timeline without waits.
struct OffloadCopy {
  TensorId tensor = kNoId;  ///< in the original graph
  int64_t bytes = 0;
  int64_t host_bytes = 0;  ///< PinnedHostBytes(bytes)
  double out_start_us = 0, out_end_us = 0;
  double in_start_us = 0, in_end_us = 0;
  NodeId freed_after = kNoId;     ///< original node after which the device copy is freed
  NodeId reloaded_before = kNoId; ///< original node before which it is allocated again
  NodeId first_reader = kNoId;    ///< first non-forward reader, original node
};

struct OffloadedGraph {
  Graph graph;  ///< the rewritten graph; original tensors keep their ids
  /// Per node of `graph`: the original node, or kNoId for an inserted one.
  std::vector<NodeId> original_node;
  /// Per original node: its id in `graph` (the inverse of original_node).
  std::vector<NodeId> rewritten_node;
  /// Per offloaded tensor (original id order): its copies.
  std::vector<OffloadCopy> copies;
  /// Per original node: when it starts and ends, microseconds from the start
  /// of the step on the real timeline (waits for copies included); empty when
  /// nothing is offloaded. Reports place the copies on the step axis by these.
  std::vector<double> node_start_us, node_end_us;
  double exposed_us = 0;     ///< steps' waits for copies
  double exposed_cost = 0;   ///< exposed_us x cost_per_us
  int64_t host_peak_bytes = 0;  ///< most host bytes held at once
  /// True when host_peak_bytes exceeds options.host_budget_bytes.
  bool over_host_budget = false;
};

/// Rewrites `graph` so that the tensors of `offloaded` (each CanOffload; any
/// order, duplicates ignored) are offloaded as described above. With none,
/// the graph is returned unchanged.
OffloadedGraph ApplyOffload(const Graph& graph, std::vector<TensorId> offloaded,
                            const OffloadOptions& options);

/// `keep` (over the original graph's tensors) over the rewrite's: the
/// original tensors keep their ids, offloaded ones are saved, the copies the
/// rewrite adds are not candidates.
SaveSet KeepOnRewrite(const SaveSet& keep, const OffloadedGraph& offloaded);

}  // namespace ckptplan

#endif  // CKPTPLAN_OFFLOAD_H_
