#include "ckptplan/sim/offload.h"

#include <doctest/doctest.h>

#include "ckptplan/sim/simulator.h"
#include "offload_graphs.h"

namespace ckptplan {
namespace {

using testing::OffloadChain;
using testing::OffloadLink;

TensorId Id(const Graph& graph, const std::string& name) {
  const TensorId t = testing::Id(graph, name);
  REQUIRE(t != kNoId);
  return t;
}

TEST_CASE("offload: a fast link hides both copies and frees a's storage between them") {
  const Graph graph = OffloadChain();
  const TensorId a = Id(graph, "a");
  REQUIRE(CanOffload(graph, a));
  CHECK_FALSE(CanOffload(graph, Id(graph, "x")));  // resident
  // 1000 B/us: each copy of a's 1000 B takes 1 us.
  const OffloadedGraph off = ApplyOffload(graph, {a}, OffloadLink(graph, 1000, 1000));
  REQUIRE(off.copies.size() == 1);
  const OffloadCopy& copy = off.copies[0];
  // Out: a is made at the end of f1 (10 us), copied over [10, 11): done during
  // f2, so its device storage is freed after f2 (also a's last forward read).
  CHECK(copy.out_start_us == 10);
  CHECK(copy.out_end_us == 11);
  CHECK(copy.freed_after == 1);
  // Back: due when g2 starts (50 us), so it must start by 49 us, which falls in
  // g1b [40, 50): the reload step goes before g1b, allocates a's copy there,
  // and the copy runs over [40, 41). g2 waits for nothing.
  CHECK(copy.in_start_us == 40);
  CHECK(copy.in_end_us == 41);
  CHECK(copy.reloaded_before == 4);
  CHECK(off.exposed_us == 0);
  CHECK(copy.host_bytes == 1024);  // pinned: 1000 rounded up to 2^10
  CHECK(off.host_peak_bytes == 1024);
  // Steps: f1, f2, offload-wait:a, f3, g1, reload:a, g1b, g2.
  REQUIRE(off.graph.nodes.size() == 8);
  CHECK(off.graph.nodes[2].name == "offload-wait:a");
  CHECK(off.graph.nodes[5].name == "reload:a");
  CHECK(off.original_node == std::vector<NodeId>{0, 1, kNoId, 2, 3, kNoId, 4, 5});
  ValidateGraph(off.graph);
  const SimResult sim = Simulate(off.graph, SaveAll(off.graph), {0, false});
  // f1:    x 100 + a 1000                          = 1100
  // f2:    x + a + b 1000                          = 2100
  // wait:  the same; a freed after it              = 2100
  // f3:    x + b + c 100                           = 1200
  // g1:    x + b + c + gb 100                      = 1300 (b, c freed)
  // reload:x + gb + a@reload 1000                  = 1200
  // g1b:   x + gb + a@reload + gb2 100             = 1300 (gb freed)
  // g2:    x + a@reload + gb2 + ga 100             = 1300
  CHECK(sim.total == std::vector<int64_t>{1100, 2100, 2100, 1200, 1300, 1200, 1300, 1300});
  CHECK(sim.peak_bytes == 2100);  // save-all: 2300 at g1
  CHECK(Simulate(graph, SaveAll(graph), {0, false}).peak_bytes == 2300);
}

TEST_CASE("offload: a slow copy back is exposed time") {
  const Graph graph = OffloadChain();
  // Out at 1000 B/us (done at 11 us); back at 40 B/us: 1000 B take 25 us. Due at
  // 50 us, it would start at 25 us, before the backward (30 us): it starts at
  // 30 us, before g1, and ends at 55 us; g2 (at 50 us) waits 5 us.
  const OffloadedGraph off = ApplyOffload(graph, {Id(graph, "a")}, OffloadLink(graph, 1000, 40));
  REQUIRE(off.copies.size() == 1);
  CHECK(off.copies[0].reloaded_before == 3);
  CHECK(off.copies[0].in_start_us == 30);
  CHECK(off.copies[0].in_end_us == 55);
  CHECK(off.exposed_us == 5);
  CHECK(off.exposed_cost == 5);  // 1 cost unit (FLOP) per us
}

TEST_CASE("offload: a copy out that outlasts the forward holds the storage and the backward") {
  const Graph graph = OffloadChain();
  // Out at 40 B/us: 25 us from 10 us to 35 us, past the forward's end (30 us):
  // freed after f3 (the forward's last step) and the backward starts 5 us late.
  OffloadOptions options = OffloadLink(graph, 40, 1000);
  options.host_budget_bytes = 1000;  // a's pinned buffer takes 1024
  const OffloadedGraph off = ApplyOffload(graph, {Id(graph, "a")}, options);
  REQUIRE(off.copies.size() == 1);
  CHECK(off.copies[0].freed_after == 2);
  CHECK(off.exposed_us == 5);
  CHECK(off.over_host_budget);
}

TEST_CASE("offload: nothing offloaded leaves the graph as it is") {
  const Graph graph = OffloadChain();
  const OffloadedGraph off = ApplyOffload(graph, {Id(graph, "x")}, OffloadLink(graph, 1000, 1000));
  CHECK(off.copies.empty());
  CHECK(off.graph.nodes.size() == graph.nodes.size());
  CHECK(off.exposed_us == 0);
}

TEST_CASE("PinnedHostBytes rounds up to a power of two") {
  CHECK(PinnedHostBytes(0) == 0);
  CHECK(PinnedHostBytes(1) == 1);
  CHECK(PinnedHostBytes(1000) == 1024);
  CHECK(PinnedHostBytes(1024) == 1024);
  CHECK(PinnedHostBytes(1025) == 2048);
}

}  // namespace
}  // namespace ckptplan
