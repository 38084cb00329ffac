// Megatron-style tensor parallelism (--tp) and sequence parallelism (--sp):
// the graph of one tensor-parallel rank, made from the graph of one device.
//
// The transform only changes sizes and costs and inserts collective nodes;
// the simulator's memory rule is applied to the result unchanged. Every
// tensor-parallel rank has the same graph (sizes are ceil(bytes / tp)).
#ifndef CKPTPLAN_DIST_TENSOR_PARALLEL_H_
#define CKPTPLAN_DIST_TENSOR_PARALLEL_H_

#include <string>
#include <vector>

#include "ckptplan/dist/layout.h"
#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// Each node's part under tensor parallelism (kAuto for nodes that are not
/// a linear or an embedding). When any node of the graph carries a "tp"
/// field, those fields decide and the rule is not used. Otherwise, per block
/// (a node's scope up to the component after its module unit: "h.0/attn",
/// "h.0.mlp/c_fc" -> "h.0/mlp"), over the forward linears (matmul, mm,
/// addmm, linear, gemm reading a parameter, directly or through one-input
/// nodes such as casts, views, transposes): a linear whose input depends,
/// through forward nodes of its block, on an earlier column-parallel
/// linear's output is row-parallel; the others are column-parallel; a block
/// without a row-parallel linear is replicated. With tp_embedding "vocab",
/// the last forward linear of the graph not in such a block (the head) is
/// column-parallel and the forward embedding (embedding or gather op reading
/// a graph input and a parameter) with the largest parameter is row-parallel
/// (split by vocabulary, its output all-reduced).
std::vector<TpRole> FindTpRoles(const Graph& graph, const std::string& tp_embedding);

/// Counts of what TensorParallelGraph changed, for messages and tests.
struct TpSummary {
  int column = 0, row = 0;  ///< forward nodes of each part
  int collectives = 0;      ///< all_reduce, all_gather and reduce_scatter nodes inserted
};

/// The graph of one of `layout.tp` tensor-parallel ranks. Parameters of
/// column-parallel nodes and the weight of row-parallel ones (and their
/// gradients and optimizer state) are ceil(bytes / tp); so is every tensor
/// made from a sharded tensor, except the output of a row-parallel node in
/// forward and the input gradient a column-parallel node makes in backward
/// (partial sums: an in-place `tp.all_reduce` node follows each), and
/// scalars (at most 8 bytes). Nodes that read or make a sharded tensor cost
/// 1 / tp. With layout.sp the activations between the parallel regions are
/// sequence shards too: a `tp.reduce_scatter` node replaces each all-reduce
/// (making a new ceil(bytes / tp) tensor that later nodes read), a
/// `tp.all_gather` node makes the full input of each column-parallel node
/// (read by it only, so freed after it), a backward `tp.all_gather` re-makes
/// it for the nodes of the backward that read the saved (sharded) input,
/// and another gathers the output gradient for a row-parallel node's
/// backward. Throws InputError when --tp is given and the graph has no
/// parallel node.
Graph TensorParallelGraph(const Graph& graph, const ParallelLayout& layout,
                          TpSummary* summary = nullptr);

}  // namespace ckptplan

#endif  // CKPTPLAN_DIST_TENSOR_PARALLEL_H_
