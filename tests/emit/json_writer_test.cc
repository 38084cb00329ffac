// GraphToJson against the reader: what `generate` writes loads back the same.
#include "ckptplan/emit/json_writer.h"

#include <doctest/doctest.h>

#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/ir/synth.h"

namespace ckptplan {
namespace {

TEST_CASE("GraphToJson round-trips synthetic graphs") {
  RandomGraphOptions options;
  options.seed = 7;
  Graph graph = RandomTrainingGraph(options);
  Graph again = ParseJsonGraph(GraphToJson(graph), "round-trip.json");
  REQUIRE(again.tensors.size() == graph.tensors.size());
  REQUIRE(again.nodes.size() == graph.nodes.size());
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    CHECK(again.tensors[t].name == graph.tensors[t].name);
    CHECK(again.tensors[t].bytes == graph.tensors[t].bytes);
    CHECK(again.tensors[t].alias_of == graph.tensors[t].alias_of);
  }
  CHECK(again.training.extra_optimizer_bytes == graph.training.extra_optimizer_bytes);
  CHECK(GraphToJson(again) == GraphToJson(graph));
}

TEST_CASE("a generated transformer round-trips through the stream") {
  TransformerOptions options;
  options.layers = 2;
  options.microbatches = 2;
  Graph graph = TransformerGraph(options);
  Graph loaded = ParseJsonGraph(GraphToJson(graph), "t.json");
  REQUIRE(loaded.nodes.size() == graph.nodes.size());
  REQUIRE(loaded.tensors.size() == graph.tensors.size());
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    CHECK(loaded.nodes[n].inputs == graph.nodes[n].inputs);
    CHECK(loaded.nodes[n].outputs == graph.nodes[n].outputs);
  }
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    CHECK(loaded.tensors[t].alias_of == graph.tensors[t].alias_of);
    CHECK(loaded.tensors[t].bytes == graph.tensors[t].bytes);
  }
}

}  // namespace
}  // namespace ckptplan
