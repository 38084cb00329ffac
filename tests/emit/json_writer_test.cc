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

TEST_CASE("GraphToJson writes approx options back as read") {
  Graph graph = LoadJsonGraph(CKPTPLAN_SOURCE_DIR "/tests/graphs/approx_mlp.json");
  graph.nodes[1].approx[0].workspace_bytes = 65536;  // given: written, 0 included
  graph.nodes[1].approx[1].workspace_bytes = 0;
  graph.nodes[1].approx[0].factor_bytes = 32768;
  const Graph again = ParseJsonGraph(GraphToJson(graph), "round-trip.json");
  REQUIRE(again.nodes.size() == graph.nodes.size());
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    REQUIRE(again.nodes[n].approx.size() == graph.nodes[n].approx.size());
    for (size_t o = 0; o < graph.nodes[n].approx.size(); ++o) {
      CHECK(again.nodes[n].approx[o].rank == graph.nodes[n].approx[o].rank);
      CHECK(again.nodes[n].approx[o].flops == graph.nodes[n].approx[o].flops);
      CHECK(again.nodes[n].approx[o].error == graph.nodes[n].approx[o].error);
      CHECK(again.nodes[n].approx[o].output_error == graph.nodes[n].approx[o].output_error);
      CHECK(again.nodes[n].approx[o].workspace_bytes ==
            graph.nodes[n].approx[o].workspace_bytes);
      CHECK(again.nodes[n].approx[o].factor_bytes == graph.nodes[n].approx[o].factor_bytes);
    }
  }
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
