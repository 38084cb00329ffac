// What the plan file writes for tools that apply it (python/ckptplan_torch):
// each decision's module block and the dtype sizes ckptplan counts with.
#include "ckptplan/emit/plan_io.h"

#include <doctest/doctest.h>

#include "ckptplan/ir/scope.h"
#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

TEST_CASE("plan file: decisions name their block, the dtype table is written") {
  const Graph graph = testing::SmallTransformer(1);
  const SaveSet keep = SaveAll(graph);
  const SimResult sim = Simulate(graph, keep, SimOptions());
  PlanRecord record;
  record.save_all = &sim;
  record.planned = &sim;
  record.keep = &keep;
  const nlohmann::ordered_json plan = PlanToJson(graph, record);
  size_t with_block = 0;
  for (const auto& decision : plan["decisions"]) {
    const TensorId t = testing::Id(graph, decision["tensor"].get<std::string>());
    REQUIRE(t != kNoId);
    const std::string& scope = graph.nodes[graph.tensors[t].producer].scope;
    CHECK(decision.contains("block") == !scope.empty());
    if (scope.empty()) continue;
    CHECK(decision["block"] == ScopeBlock(scope));
    ++with_block;
  }
  CHECK(with_block > 0);
  // The synthetic transformer's layers are "h.0", "h.1"...: a block per layer.
  bool layer_block = false;
  for (const auto& decision : plan["decisions"]) {
    layer_block |= decision.value("block", "").rfind("h.", 0) == 0;
  }
  CHECK(layer_block);
  const auto& dtypes = plan["dtype_bytes"];
  CHECK(dtypes["float32"] == 4);
  CHECK(dtypes["bfloat16"] == 2);
  CHECK(dtypes["int64"] == 8);
  CHECK(dtypes["bool"] == 1);
  CHECK(dtypes.size() == DtypeSizes().size());
  for (const DtypeSize& dtype : DtypeSizes()) {
    CHECK(dtypes[std::string(dtype.name)] == DtypeBytes(dtype.name));
  }
}

}  // namespace
}  // namespace ckptplan
