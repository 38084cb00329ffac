// The chain the offload tests share (simulator, planner, emit's copy lanes)
// and the link they time it on.
#ifndef CKPTPLAN_TESTS_OFFLOAD_GRAPHS_H_
#define CKPTPLAN_TESTS_OFFLOAD_GRAPHS_H_

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/offload.h"
#include "ir_graphs.h"

namespace ckptplan::testing {

// x (100, input) -f1-> a (1000) -f2-> b (1000) -f3-> c (100); backward g1
// reads c and b, g1b gives g2 time, g2 reads a. Every node costs 10 FLOP,
// timed at 1 FLOP/us (OffloadLink): node n runs over [10n, 10n + 10) us.
// Save-all: f1 1100, f2 2100, f3 2200, g1 2300 (b, c freed), g1b 1300, g2 1300.
inline Graph OffloadChain() {
  GraphBuilder b;
  b.Tensor("x", 100, TensorKind::kInput).Tensor("a", 1000).Tensor("b", 1000).Tensor("c", 100);
  b.Tensor("gb", 100).Tensor("gb2", 100).Tensor("ga", 100);
  b.Node("f1", "op", Phase::kForward, {"x"}, {"a"}, 10);
  b.Node("f2", "op", Phase::kForward, {"a"}, {"b"}, 10);
  b.Node("f3", "op", Phase::kForward, {"b"}, {"c"}, 10);
  b.Node("g1", "op", Phase::kBackward, {"c", "b"}, {"gb"}, 10);
  b.Node("g1b", "op", Phase::kBackward, {"gb"}, {"gb2"}, 10);
  b.Node("g2", "op", Phase::kBackward, {"gb2", "a"}, {"ga"}, 10);
  return b.Build();
}

// A link of `out_bytes_per_us` to the host and `in_bytes_per_us` back, nodes
// timed at 1 FLOP/us.
inline OffloadOptions OffloadLink(const Graph& graph, double out_bytes_per_us,
                                  double in_bytes_per_us) {
  OffloadOptions options;
  options.link = {out_bytes_per_us * 1e6, in_bytes_per_us * 1e6};
  options.node_time_us = NodeTimes(graph, 1.0);
  return options;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_OFFLOAD_GRAPHS_H_
