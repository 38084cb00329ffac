// In-place writes in the JSON graph format: a node listing among its outputs a
// tensor it reads, or a resident tensor, writes that storage; the loader
// lowers it to the alias_of form (json_loader.cc, WriteInPlace).
#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/simulator.h"
#include "json_graphs.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

std::string Wrap(const std::string& tensors, const std::string& nodes) {
  return R"({"format":"ckptplan.graph","version":1,"tensors":[)" + tensors +
         R"(],"nodes":[)" + nodes + "]}";
}

// One linear layer trained with Adam: x (64 B input), w (1024 B parameter),
// Adam moments m, v (1024 B each), BatchNorm-like running stats rm (16 B
// buffer) that bn.stats writes without reading them.
constexpr const char* kTensors =
    R"({"id":"x","bytes":64,"kind":"input"},{"id":"w","bytes":1024,"kind":"parameter"},
       {"id":"m","bytes":1024,"kind":"optimizer_state"},{"id":"v","bytes":1024,"kind":"optimizer_state"},
       {"id":"rm","bytes":16,"kind":"buffer"},{"id":"h","bytes":256},{"id":"loss","bytes":4},
       {"id":"dh","bytes":256},{"id":"dw","bytes":1024,"kind":"gradient"},{"id":"denom","bytes":1024})";

// The optimizer nodes name w, m and v among their outputs: in place.
const std::string kInPlace = Wrap(kTensors,
    R"({"id":"fc","op":"matmul","phase":"forward","inputs":["x","w"],"outputs":["h"],"flops":8},
       {"id":"bn.stats","op":"running_mean","phase":"forward","inputs":["h"],"outputs":["rm"],"flops":1},
       {"id":"sum","op":"sum","phase":"forward","inputs":["h"],"outputs":["loss"],"flops":1},
       {"id":"sum_bwd","op":"sum_bwd","phase":"backward","inputs":["loss"],"outputs":["dh"],"flops":1},
       {"id":"fc_bwd","op":"matmul_bwd","phase":"backward","inputs":["dh","h"],"outputs":["dw"],"flops":8},
       {"id":"adam.m","op":"lerp_","phase":"optimizer","inputs":["m","dw"],"outputs":["m"],"flops":1},
       {"id":"adam.v","op":"addcmul_","phase":"optimizer","inputs":["v","dw"],"outputs":["v"],"flops":1},
       {"id":"adam.denom","op":"sqrt","phase":"optimizer","inputs":["v"],"outputs":["denom"],"flops":1},
       {"id":"adam.w","op":"addcdiv_","phase":"optimizer","inputs":["w","m","denom"],"outputs":["w"],"flops":1})");

// The same graph written with alias_of tensors, as scripts/export_torch.py writes it.
const std::string kAliased = Wrap(std::string(kTensors) +
    R"(,{"id":"rm1","alias_of":"rm","kind":"buffer"},{"id":"m1","alias_of":"m","kind":"optimizer_state"},
        {"id":"v1","alias_of":"v","kind":"optimizer_state"},{"id":"w1","alias_of":"w","kind":"parameter"})",
    R"({"id":"fc","op":"matmul","phase":"forward","inputs":["x","w"],"outputs":["h"],"flops":8},
       {"id":"bn.stats","op":"running_mean","phase":"forward","inputs":["h","rm"],"outputs":["rm1"],"flops":1},
       {"id":"sum","op":"sum","phase":"forward","inputs":["h"],"outputs":["loss"],"flops":1},
       {"id":"sum_bwd","op":"sum_bwd","phase":"backward","inputs":["loss"],"outputs":["dh"],"flops":1},
       {"id":"fc_bwd","op":"matmul_bwd","phase":"backward","inputs":["dh","h"],"outputs":["dw"],"flops":8},
       {"id":"adam.m","op":"lerp_","phase":"optimizer","inputs":["m","dw"],"outputs":["m1"],"flops":1},
       {"id":"adam.v","op":"addcmul_","phase":"optimizer","inputs":["v","dw"],"outputs":["v1"],"flops":1},
       {"id":"adam.denom","op":"sqrt","phase":"optimizer","inputs":["v1"],"outputs":["denom"],"flops":1},
       {"id":"adam.w","op":"addcdiv_","phase":"optimizer","inputs":["w","m1","denom"],"outputs":["w1"],"flops":1})");

TEST_CASE("in-place optimizer writes simulate like their alias_of form") {
  const Graph in_place = testing::FromJson(kInPlace);
  const Graph aliased = testing::FromJson(kAliased);
  // Resident: x 64 + w 1024 + m 1024 + v 1024 + rm 16 = 3152 B.
  // fc 3152 + h 256 = 3408; sum 3412; sum_bwd + dh 256 = 3668;
  // fc_bwd: 3152 + h 256 + dh 256 + dw 1024 = 4688, then h, dh, loss freed: 4176;
  // adam.m, adam.v write m, v in place: 4176 (new storages would add 2048);
  // adam.denom: 4176 + denom 1024 = 5200 = the peak, first reached at step 7.
  const SimResult a = Simulate(in_place, SaveAll(in_place), SimOptions());
  const SimResult b = Simulate(aliased, SaveAll(aliased), SimOptions());
  CHECK(a.peak_bytes == 5200);
  CHECK(b.peak_bytes == 5200);
  CHECK(a.peak_step == 7);
  CHECK(b.peak_step == 7);
  CHECK(SaveCandidates(in_place) == SaveCandidates(aliased));  // h and loss
  CHECK(SaveCandidates(in_place).size() == 2);
}

TEST_CASE("an in-place write makes a new version of the same kind; later reads see it") {
  const Graph graph = testing::FromJson(kInPlace);
  const TensorId w = testing::Id(graph, "w"), m = testing::Id(graph, "m");
  const TensorId w1 = testing::Id(graph, "w@adam.w"), m1 = testing::Id(graph, "m@adam.m");
  const TensorId rm1 = testing::Id(graph, "rm@bn.stats");
  CHECK(graph.tensors[w1].alias_of == w);
  CHECK(graph.tensors[w1].kind == TensorKind::kParameter);
  CHECK(graph.tensors[m1].kind == TensorKind::kOptimizerState);
  CHECK(graph.tensors[rm1].kind == TensorKind::kBuffer);
  // The forward read of w, before its update, reads the original.
  CHECK(graph.nodes[0].inputs == std::vector<TensorId>{testing::Id(graph, "x"), w});
  // adam.w reads the updated moment, and bn.stats reads the buffer it writes.
  CHECK(graph.nodes[8].inputs[1] == m1);
  CHECK(graph.nodes[1].inputs.back() == testing::Id(graph, "rm"));
  // The update allocates nothing: no storage root beyond the listed tensors.
  CHECK(graph.StorageRoot(w1) == w);
}

TEST_CASE("in-place writes of activations chain versions; real mistakes stay errors") {
  // relu_ writes a in place, then add_ writes it again: three versions of one
  // storage, and the backward reads the newest.
  const Graph graph = testing::FromJson(Wrap(
      R"({"id":"x","bytes":8,"kind":"input"},{"id":"a","bytes":100},{"id":"da","bytes":100})",
      R"({"id":"f","op":"mul","phase":"forward","inputs":["x"],"outputs":["a"],"flops":1},
         {"id":"relu_","op":"relu_","phase":"forward","inputs":["a"],"outputs":["a"],"flops":1},
         {"id":"add_","op":"add_","phase":"forward","inputs":["a","x"],"outputs":["a"],"flops":1},
         {"id":"g","op":"relu_bwd","phase":"backward","inputs":["a"],"outputs":["da"],"flops":1})"));
  const TensorId a = testing::Id(graph, "a"), a1 = testing::Id(graph, "a@relu_");
  const TensorId a2 = testing::Id(graph, "a@add_");
  CHECK(graph.tensors[a1].alias_of == a);
  CHECK(graph.tensors[a2].alias_of == a1);
  CHECK(graph.nodes[3].inputs == std::vector<TensorId>{a2});
  // x 8 + a 100 + da 100: one storage for a's three versions.
  CHECK(Simulate(graph, SaveAll(graph), SimOptions()).peak_bytes == 208);

  auto rejection = [](const std::string& text) -> std::string {
    try {
      testing::FromJson(text);
    } catch (const InputError& e) {
      return e.what();
    }
    return "accepted";
  };
  // Writing an activation the node does not read is a second producer.
  CHECK(rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1})",
      R"({"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]},
         {"id":"g","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]})"))
            .find("tensor 'a' is produced by both node 'f' and node 'g'") != std::string::npos);
  // Writing in place a tensor nobody has made yet is a read before production.
  CHECK(rejection(Wrap(R"({"id":"x","bytes":1,"kind":"input"},{"id":"a","bytes":1})",
      R"({"id":"f","op":"relu_","phase":"forward","inputs":["x","a"],"outputs":["a"]})"))
            .find("reads tensor 'a' before node 'f' produces it") != std::string::npos);
}

TEST_CASE("an exported PyTorch joint graph in its in-place form plans like its alias_of form") {
  // tests/graphs/torch_mlp_*.json: scripts/export_torch.py (with and without
  // --in-place) on tests/torch/models.py:make_mlp_small, a 16-32-32-4 MLP with
  // Adam, batch 4. The in-place form lists 42 fewer tensors.
  const std::string dir = std::string(CKPTPLAN_SOURCE_DIR) + "/tests/graphs/";
  const Graph aliased = LoadJsonGraph(dir + "torch_mlp_alias.json");
  const Graph in_place = LoadJsonGraph(dir + "torch_mlp_in_place.json");
  CHECK(in_place.tensors.size() == aliased.tensors.size());  // 77 listed + 42 versions
  const SimResult a = Simulate(aliased, SaveAll(aliased), SimOptions());
  const SimResult b = Simulate(in_place, SaveAll(in_place), SimOptions());
  // Parameters (16x32+32 + 32x32+32 + 32x4+4) x 4 B = 6928; gradients 6928;
  // Adam moments 2 x 6928 + 6 step counters x 4 B = 13880; inputs x 4x16x4 B
  // + y 4x8 B + the loss tangent 4 B = 292; temporaries at opt_28: sqrt and
  // div of the 32x32 moment (4096 each) + 128 = 8320. Total 36348.
  CHECK(a.peak_bytes == 36348);
  CHECK(b.peak_bytes == 36348);
  CHECK(a.peak_step == b.peak_step);
  CHECK(SaveCandidates(aliased).size() == SaveCandidates(in_place).size());
}

}  // namespace
}  // namespace ckptplan
