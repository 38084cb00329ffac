#include "ckptplan/ingest/json_loader.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "json_graphs.h"

namespace ckptplan {
namespace {

// The message a graph text is rejected with; fails the test if accepted.
std::string Rejection(const std::string& text) {
  try {
    ParseJsonGraph(text, "bad.json");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  FAIL("graph was accepted");
  return "";
}

std::string Wrap(const std::string& tensors, const std::string& nodes) {
  return R"({"format":"ckptplan.graph","version":1,"tensors":[)" + tensors +
         R"(],"nodes":[)" + nodes + "]}";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("loads tensors, nodes, shapes, aliases and the training block") {
  Graph graph = testing::FromJson(testing::kChainGraph);
  CHECK(graph.tensors.size() == 8);
  CHECK(graph.nodes.size() == 7);
  CHECK(graph.tensors[testing::Id(graph, "a")].producer == 0);
  CHECK(graph.training.parameter_count == 2);        // w: 8 B of float32
  CHECK(graph.training.extra_optimizer_bytes == 16);  // Adam: 8 B per parameter
  CHECK(graph.cost_unit == CostUnit::kFlops);
  // The same graph built in the IR for the simulator's tests (ir_graphs.h).
  const Graph built = testing::ChainGraph();
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    CHECK(graph.tensors[t].name == built.tensors[t].name);
    CHECK(graph.tensors[t].bytes == built.tensors[t].bytes);
    CHECK(graph.tensors[t].kind == built.tensors[t].kind);
    CHECK(graph.tensors[t].producer == built.tensors[t].producer);
  }
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    CHECK(graph.nodes[n].inputs == built.nodes[n].inputs);
    CHECK(graph.nodes[n].outputs == built.nodes[n].outputs);
    CHECK(graph.NodeCost(n) == built.NodeCost(n));
  }
  CHECK(graph.training.optimizer_bytes_per_param == built.training.optimizer_bytes_per_param);
  CHECK(graph.training.extra_parameter_bytes == built.training.extra_parameter_bytes);
  CHECK(graph.training.implicit_gradient_bytes == built.training.implicit_gradient_bytes);
  // The training block simulator_test's implicit-gradient graph stands for:
  // 1000 parameters, fp32 4000 B, AdamW 8 B each, bf16 gradients 2000 B.
  Graph implicit = testing::FromJson(R"({"format":"ckptplan.graph","version":1,
"training":{"optimizer":"adamw","parameter_count":1000,"gradient_dtype":"bfloat16"},
"tensors":[{"id":"x","bytes":10,"kind":"input"}],"nodes":[]})");
  CHECK(implicit.training.extra_parameter_bytes == 4000);
  CHECK(implicit.training.extra_optimizer_bytes == 8000);
  CHECK(implicit.training.implicit_gradient_bytes == 2000);
  Graph shaped = testing::FromJson(Wrap(
      R"({"id":"x","shape":[2,3],"dtype":"bfloat16","kind":"input"},{"id":"v","alias_of":"x","kind":"input"})",
      ""));
  CHECK(shaped.tensors[0].bytes == 12);  // 2 x 3 x 2 B
  CHECK(shaped.tensors[1].alias_of == 0);
}

TEST_CASE("malformed JSON names the file and the byte") {
  std::string message = Rejection(R"({"format":"ckptplan.graph", "version":)");
  CHECK(Contains(message, "bad.json: malformed JSON at byte"));
}

TEST_CASE("schema violations are all reported at once") {
  std::string message = Rejection(Wrap(
      R"({"id":"x","bytes":-5,"kind":"input"},{"id":"y","bytes":"12"},{"id":"z","kind":"weights","bytes":1})",
      R"({"id":"n","op":"relu","phase":"sideways","inputs":["x"],"outputs":["y"]})"));
  CHECK(Contains(message, "bad.json: tensor 'x': bytes must be an integer"));
  CHECK(Contains(message, "tensor 'y': bytes must be an integer"));
  CHECK(Contains(message, "tensor 'z': unknown kind 'weights'"));
  CHECK(Contains(message, "node 'n': \"phase\" must be forward, backward or optimizer"));
}

TEST_CASE("wrong format or version") {
  CHECK(Contains(Rejection(R"({"format":"other","version":1,"tensors":[],"nodes":[]})"),
                 "\"format\" must be \"ckptplan.graph\""));
  CHECK(Contains(Rejection(R"({"format":"ckptplan.graph","version":2,"tensors":[],"nodes":[]})"),
                 "\"version\" must be 1, got 2"));
  CHECK(Contains(Rejection("[1,2]"), "top level must be a JSON object"));
}

TEST_CASE("unknown tensor ids are named") {
  std::string message = Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"})",
      R"({"id":"n","op":"relu","phase":"forward","inputs":["x","ghost"],"outputs":["y"]})"));
  CHECK(Contains(message, "node 'n': inputs names unknown tensor 'ghost'"));
  CHECK(Contains(message, "node 'n': outputs names unknown tensor 'y'"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"v","alias_of":"nope","bytes":0})", "")),
                 "tensor 'v': alias_of names unknown tensor 'nope'"));
}

TEST_CASE("duplicate ids") {
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"x","bytes":2,"kind":"input"})", "")),
                 "tensor 'x': duplicate tensor id"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1},{"id":"b","bytes":1})",
      R"({"id":"n","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]},
         {"id":"n","op":"relu","phase":"forward","inputs":["a"],"outputs":["b"]})")),
                 "node 'n': duplicate node id"));
}

TEST_CASE("cycles and reads before production are named") {
  // a = f(b), b = g(a): a cycle; whichever order, one node reads first.
  std::string message = Rejection(Wrap(R"({"id":"a","bytes":1},{"id":"b","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["b"],"outputs":["a"]},
         {"id":"g","op":"relu","phase":"forward","inputs":["a"],"outputs":["b"]})"));
  CHECK(Contains(message, "node 'f' (forward) reads tensor 'b' before node 'g' produces it"));
  // A backward node listed before the forward node that makes its input.
  message = Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1},{"id":"da","bytes":1})",
      R"({"id":"f_bwd","op":"relu_bwd","phase":"backward","inputs":["a"],"outputs":["da"]},
         {"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]})"));
  CHECK(Contains(message, "node 'f_bwd' (backward) reads tensor 'a' before node 'f' produces it"));
}

TEST_CASE("activations nobody produces, double producers, aliases of unread tensors") {
  CHECK(Contains(Rejection(Wrap(R"({"id":"a","bytes":1},{"id":"b","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["a"],"outputs":["b"]})")),
                 "reads tensor 'a' of kind activation that no node produces"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]},
         {"id":"g","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]})")),
                 "tensor 'a' is produced by both node 'f' and node 'g'"));
  // A node naming a parameter among its outputs writes it in place
  // (in_place_test.cc); an alias_of tensor the producer does not read is wrong.
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"w","bytes":1,"kind":"parameter"},{"id":"w1","alias_of":"w","kind":"parameter"})",
      R"({"id":"f","op":"init","phase":"forward","inputs":["x"],"outputs":["w1"]})")),
                 "tensor 'w1' aliases tensor 'w', which is not an input of its producer 'f'"));
}

TEST_CASE("negative and overflowing sizes and costs") {
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","shape":[4294967296,4294967296],"dtype":"float32","kind":"input"})", "")),
                 "overflows 64 bits"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","shape":[2305843009213693952],"dtype":"float64","kind":"input"})", "")),
                 "overflows 64 bits"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":18446744073709551615,"kind":"input"})", "")),
                 "bytes must be an integer in [0, 2^63-1]"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","shape":[2],"dtype":"float7","kind":"input"})", "")),
                 "unknown dtype 'float7'"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"],"flops":-3,"workspace_bytes":-1})")),
                 "node 'f': flops must be finite and >= 0, got -3"));
  CHECK(Contains(Rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"],"time_us":1e400})")),
                 "malformed JSON"));
}

TEST_CASE("a node's tensor-parallel part: column, row or replicated") {
  const std::string tensors = R"({"id":"x","bytes":4,"kind":"input"},{"id":"w","bytes":4,"kind":"parameter"},{"id":"a","bytes":4},{"id":"b","bytes":4})";
  Graph g = ParseJsonGraph(Wrap(tensors,
      R"({"id":"f","op":"matmul","phase":"forward","inputs":["x","w"],"outputs":["a"],"tp":"column"},)"
      R"({"id":"g","op":"relu","phase":"forward","inputs":["a"],"outputs":["b"]})"), "tp.json");
  CHECK(g.nodes[0].tp == TpRole::kColumn);
  CHECK(g.nodes[1].tp == TpRole::kAuto);
  CHECK(Contains(Rejection(Wrap(tensors,
      R"({"id":"f","op":"matmul","phase":"forward","inputs":["x","w"],"outputs":["a"],"tp":"diagonal"})")),
                 "node 'f': \"tp\" must be column, row or replicated, got \"diagonal\""));
}

TEST_CASE("approx options load sorted by rank; the sample graph has them on its linears") {
  Graph graph = LoadJsonGraph(CKPTPLAN_SOURCE_DIR "/tests/graphs/approx_mlp.json");
  const Node& fc1 = graph.nodes[1];
  REQUIRE(fc1.name == "fc1");
  REQUIRE(fc1.approx.size() == 4);
  CHECK(fc1.approx[0].rank == 16);
  // 2 x batch 1024 x rank 16 x (256 in + 512 out) = 25,165,824 FLOP.
  CHECK(fc1.approx[0].flops == 25165824);
  CHECK(fc1.approx[0].error == 0.05);
  CHECK(fc1.approx[0].output_error == doctest::Approx(0.3));
  CHECK(fc1.approx[0].time_us == -1);
  CHECK(graph.ApproxCost(1, fc1.approx[0]) == 25165824);
  CHECK(graph.nodes[2].approx.empty());
  const Graph sorted = ParseJsonGraph(Wrap(R"({"id":"x","bytes":4,"kind":"input"},
{"id":"w","bytes":4,"kind":"parameter"},{"id":"y","bytes":4})",
      R"({"id":"mm","op":"MatMul","phase":"forward","inputs":["x","w"],"outputs":["y"],
"time_us":10,"flops":100,"approx":[{"rank":8,"flops":50,"error":0.1},
{"rank":2,"flops":20,"time_us":3,"error":0.3}]})"), "sorted.json");
  REQUIRE(sorted.nodes[0].approx.size() == 2);
  CHECK(sorted.nodes[0].approx[0].rank == 2);
  CHECK(sorted.cost_unit == CostUnit::kMicroseconds);
  CHECK(sorted.ApproxCost(0, sorted.nodes[0].approx[0]) == 3);  // its own time_us
  // Without time_us: the node's 10 us x 50 / 100 FLOP = 5 us.
  CHECK(sorted.ApproxCost(0, sorted.nodes[0].approx[1]) == 5);
  // The memory fields: absent, the node's own workspace and no factors.
  CHECK(sorted.nodes[0].approx[0].workspace_bytes == -1);
  CHECK(sorted.nodes[0].approx[0].factor_bytes == 0);
  const Graph memory = ParseJsonGraph(Wrap(R"({"id":"x","bytes":4,"kind":"input"},
{"id":"w","bytes":4,"kind":"parameter"},{"id":"y","bytes":4})",
      R"({"id":"mm","op":"mm","phase":"forward","inputs":["x","w"],"outputs":["y"],"flops":100,
"approx":[{"rank":2,"flops":20,"error":0.3,"workspace_bytes":0,"factor_bytes":96}]})"),
                                           "memory.json");
  CHECK(memory.nodes[0].approx[0].workspace_bytes == 0);
  CHECK(memory.nodes[0].approx[0].factor_bytes == 96);
}

TEST_CASE("approx options on a linear reading a cast copy of a transposed weight") {
  // Autocast's form: mm reads _to_copy(t(w)), an activation made from w.
  const Graph graph = ParseJsonGraph(Wrap(R"({"id":"x","bytes":2,"kind":"input"},
{"id":"w","bytes":4,"kind":"parameter"},{"id":"wt","alias_of":"w"},{"id":"wh","bytes":2},
{"id":"y","bytes":2})",
      R"({"id":"t","op":"aten.t.default","phase":"forward","inputs":["w"],"outputs":["wt"]},
{"id":"cast","op":"aten._to_copy.default","phase":"forward","inputs":["wt"],"outputs":["wh"]},
{"id":"mm","op":"aten.mm.default","phase":"forward","inputs":["x","wh"],"outputs":["y"],"flops":8,
 "approx":[{"rank":1,"flops":4,"error":0.1}]})"), "cast.json");
  CHECK(graph.nodes[2].approx.size() == 1);
}

TEST_CASE("approx options are checked, every problem named") {
  const std::string tensors = R"({"id":"x","bytes":4,"kind":"input"},
{"id":"w","bytes":4,"kind":"parameter"},{"id":"y","bytes":4},{"id":"z","bytes":4})";
  std::string message = Rejection(Wrap(tensors, R"(
{"id":"mm","op":"aten.mm.default","phase":"forward","inputs":["x","w"],"outputs":["y"],"flops":9,
 "approx":[{"rank":0,"flops":1,"error":0.1},{"rank":4,"error":-1},{"rank":4,"flops":1,"error":0.2},
           {"rank":4,"flops":1,"error":0.2}]},
{"id":"relu","op":"relu","phase":"forward","inputs":["y"],"outputs":["z"],"flops":1,
 "approx":[{"rank":2,"flops":1,"error":0.1}]})"));
  CHECK(Contains(message, "node 'mm': approx[0]: \"rank\" must be a positive integer, got 0"));
  CHECK(Contains(message, "node 'mm': approx[1]: missing \"flops\""));
  CHECK(Contains(message, "node 'mm': approx[1]: error must be finite and >= 0, got -1"));
  CHECK(Contains(message, "node 'mm': approx lists rank 4 twice"));
  message = Rejection(Wrap(tensors, R"(
{"id":"mm","op":"aten.mm.default","phase":"forward","inputs":["x","w"],"outputs":["y"],"flops":9,
 "approx":[{"rank":1,"flops":1,"error":0.1,"workspace_bytes":-4},
           {"rank":2,"flops":1,"error":0.1,"factor_bytes":1.5}]})"));
  CHECK(Contains(message, "node 'mm': approx[0]: workspace_bytes must be an integer in "
                          "[0, 2^63-1], got -4"));
  CHECK(Contains(message, "node 'mm': approx[1]: factor_bytes must be an integer in "
                          "[0, 2^63-1], got 1.5"));
  message = Rejection(Wrap(tensors, R"(
{"id":"relu","op":"relu","phase":"forward","inputs":["x"],"outputs":["y"],"flops":1,
 "approx":[{"rank":2,"flops":1,"error":0.1}]},
{"id":"mm","op":"aten.mm.default","phase":"forward","inputs":["x","y"],"outputs":["z"],"flops":9,
 "approx":[{"rank":2,"flops":1,"error":0.1}]})"));
  CHECK(Contains(message, "node 'mm': approx: the node reads no parameter (or view or cast of "
                          "one) as its weight"));
  CHECK(Contains(message, "node 'relu': approx is only for linear ops"));
  message = Rejection(Wrap(tensors, R"(
{"id":"mm","op":"addmm","phase":"backward","inputs":["x","w"],"outputs":["y"],"flops":9,
 "approx":{"rank":2}})"));
  CHECK(Contains(message, "node 'mm': \"approx\" must be an array of options, got object"));
}

}  // namespace
}  // namespace ckptplan
