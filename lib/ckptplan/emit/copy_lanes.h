// Offload copies placed on a simulation's step axis, for the reports that
// draw steps (the Perfetto trace, the HTML report): one lane per direction
// of the copy engines (sim/offload.h), each copy a slice from its start to
// its end.
#ifndef CKPTPLAN_COPY_LANES_H_
#define CKPTPLAN_COPY_LANES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// One copy between device and host.
struct CopySlice {
  bool to_host = true;  ///< the copy out; false: the copy back
  TensorId tensor = kNoId;
  int64_t bytes = 0;
  int64_t host_bytes = 0;
  double start_us = 0, end_us = 0;      ///< the model's times (OffloadCopy)
  double begin_step = 0, end_step = 0;  ///< on `sim`'s step axis: step s spans [s, s + 1)
};

/// Every copy of `offloaded` (copies out, then copies back, each in tensor id
/// order). `sim` simulates `offloaded.graph`. A time maps to the step axis
/// through the original nodes' times (OffloadedGraph::node_start_us): inside
/// a timed step, linearly; in a wait before one, to that step's start.
/// Inserted and recompute steps are untimed, so a copy spans them only when
/// it spans the timed steps around them. Empty when nothing is offloaded.
std::vector<CopySlice> CopySlices(const SimResult& sim, const OffloadedGraph& offloaded);

}  // namespace ckptplan

#endif  // CKPTPLAN_COPY_LANES_H_
