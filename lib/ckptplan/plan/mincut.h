// Min-cut start set: the least bytes to save so that backward can run while
// re-running only ops the recompute policy allows (PyTorch's partitioner).
//
// Flow network over the forward activations: each tensor t is split into
// t_in -> t_out with capacity = bytes of its storage when t is a save
// candidate (saving it cuts that edge) and infinity otherwise (the memory
// model can only save candidates). The source feeds t_in with infinite
// capacity when t's producer may not be recomputed; t_out feeds the sink with
// infinite capacity when backward reads t; every forward data dependency
// a -> b is an infinite edge a_out -> b_in. A minimum cut then saves the
// candidates whose in-edge crosses it and drops (recomputes) the candidates
// on the sink side. Max-flow is Boost.Graph's Boykov-Kolmogorov.
#ifndef CKPTPLAN_MINCUT_H_
#define CKPTPLAN_MINCUT_H_

#include <cstdint>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/recompute_policy.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

struct MinCutResult {
  SaveSet keep;                   ///< SaveAll with the recomputable candidates dropped
  int64_t cut_bytes = 0;          ///< bytes of the saved candidates (the flow value)
  std::vector<TensorId> saved;    ///< candidates saved, by id
  std::vector<TensorId> dropped;  ///< candidates recomputed, by id
};

/// Computes the min-cut save set of `graph` under `policy`.
MinCutResult MinCutStart(const Graph& graph, const RecomputePolicy& policy);
/// The same, reusing `context` (see SimContext).
MinCutResult MinCutStart(const SimContext& context, const RecomputePolicy& policy);

}  // namespace ckptplan

#endif  // CKPTPLAN_MINCUT_H_
