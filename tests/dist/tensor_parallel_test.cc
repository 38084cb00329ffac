#include "ckptplan/dist/tensor_parallel.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

// Saved activations live when the forward ends (the last forward step), by
// the simulator's rule: what the backward will read.
int64_t SavedAtForwardEnd(const Graph& g) {
  SimOptions options;
  options.record_categories = true;
  const SimResult sim = Simulate(g, SaveAll(g), options);
  size_t last = 0;
  for (size_t i = 0; i < sim.steps.size(); ++i) {
    if (g.nodes[sim.steps[i].node].phase == Phase::kForward) last = i;
  }
  return sim.by_category[last][static_cast<size_t>(Category::kSavedActivations)];
}

Graph Transformer(int layers) {
  TransformerOptions o;
  o.layers = layers;
  o.batch = 2;    // b
  o.seq = 64;     // s
  o.hidden = 64;  // h
  o.heads = 4;    // a
  o.vocab = 128;
  o.dtype_bytes = 2;  // 16-bit activations
  return TransformerGraph(o);
}

// One layer's activation bytes: what a second layer adds to the saved
// activations at the forward's end (every layer is alike; the last layer's
// output, which ln_f saves, is there in both).
int64_t PerLayer(const ParallelLayout& layout) {
  auto saved = [&](int layers) {
    const Graph g = Transformer(layers);
    return SavedAtForwardEnd(layout.tp > 1 ? TensorParallelGraph(g, layout) : g);
  };
  return saved(2) - saved(1);
}

// x -> fc1 (column) -> h -> fc2 (row) -> y -> loss, and its backward, with
// the parts given as the JSON graph's "tp" fields would.
Graph TwoLinears() {
  Graph g;
  g.source = "two-linears";
  auto tensor = [&](const char* name, int64_t bytes, TensorKind kind) {
    g.tensors.push_back({name, bytes, kind, kNoId, kNoId});
  };
  tensor("x_in", 64, TensorKind::kInput);       // 0
  tensor("w1", 128, TensorKind::kParameter);    // 1
  tensor("w2", 128, TensorKind::kParameter);    // 2
  tensor("x", 64, TensorKind::kActivation);     // 3
  tensor("h", 256, TensorKind::kActivation);    // 4
  tensor("y", 64, TensorKind::kActivation);     // 5
  tensor("loss", 4, TensorKind::kActivation);   // 6
  tensor("dy", 64, TensorKind::kActivation);    // 7
  tensor("dh", 256, TensorKind::kActivation);   // 8
  tensor("gw2", 128, TensorKind::kGradient);    // 9
  tensor("dx", 64, TensorKind::kActivation);    // 10
  tensor("gw1", 128, TensorKind::kGradient);    // 11
  auto node = [&](const char* name, const char* op, Phase phase, std::vector<TensorId> in,
                  std::vector<TensorId> out, TpRole tp = TpRole::kAuto) {
    Node n;
    n.name = name;
    n.op = op;
    n.scope = "blk/mlp";
    n.phase = phase;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.flops = 100;
    n.tp = tp;
    g.nodes.push_back(std::move(n));
  };
  node("prep", "relu", Phase::kForward, {0}, {3});
  node("fc1", "matmul", Phase::kForward, {3, 1}, {4}, TpRole::kColumn);
  node("fc2", "matmul", Phase::kForward, {4, 2}, {5}, TpRole::kRow);
  node("loss", "sum", Phase::kForward, {5}, {6});
  node("loss_bwd", "sum_bwd", Phase::kBackward, {6}, {7});
  node("fc2_bwd", "mm", Phase::kBackward, {7, 4, 2}, {8, 9});
  node("fc1_bwd", "mm", Phase::kBackward, {8, 3, 1}, {10, 11});
  g.Finalize();
  ValidateGraph(g);
  return g;
}

int64_t Peak(const Graph& g) { return Simulate(g, SaveAll(g), SimOptions()).peak_bytes; }

}  // namespace

TEST_CASE("tensor parallel: column and row parts given in the graph, by hand") {
  const Graph one = TwoLinears();
  // One device: resident x_in 64 + w1 128 + w2 128 = 320; at fc2_bwd (the
  // loss was freed after loss_bwd, y after the loss) x 64, h 256, dy 64 and
  // the new dh 256 + gw2 128 are live: 320 + 64 + 256 + 64 + 256 + 128 = 1088.
  CHECK(Peak(one) == 1088);
  ParallelLayout tp;
  tp.tp = 2;
  TpSummary summary;
  const Graph g = TensorParallelGraph(one, tp, &summary);
  CHECK(summary.column == 1);
  CHECK(summary.row == 1);
  CHECK(summary.collectives == 2);  // all-reduce after fc2 and after fc1_bwd
  // fc1's weight and fc2's split, their gradients too; h and dh are made
  // from them; y (fc2's partial sums, all-reduced) and dx (fc1_bwd's) are whole.
  auto bytes = [&](const char* name) {
    for (const Tensor& t : g.tensors) {
      if (t.name == name) return t.bytes;
    }
    return int64_t{-1};
  };
  CHECK(bytes("w1") == 64);
  CHECK(bytes("w2") == 64);
  CHECK(bytes("gw1") == 64);
  CHECK(bytes("gw2") == 64);
  CHECK(bytes("h") == 128);
  CHECK(bytes("dh") == 128);
  CHECK(bytes("y") == 64);
  CHECK(bytes("dx") == 64);
  CHECK(bytes("x") == 64);
  // Resident 64 + 64 + 64 = 192; at fc2_bwd x 64, h 128, dy 64, dh 128,
  // gw2 64: 192 + 64 + 128 + 64 + 128 + 64 = 640.
  CHECK(Peak(g) == 640);
  // Sharded nodes cost half: fc1, fc2 (reads h), fc2_bwd, fc1_bwd; prep and
  // the loss do not.
  double cost = 0;
  for (const Node& n : g.nodes) cost += n.flops > 0 ? n.flops : 0;
  CHECK(cost == 3 * 100 + 4 * 50);
}

TEST_CASE("sequence parallel: gathers before column, reduce-scatters after row, by hand") {
  ParallelLayout sp;
  sp.tp = 2;
  sp.sp = true;
  TpSummary summary;
  const Graph g = TensorParallelGraph(TwoLinears(), sp, &summary);
  // Gathers: fc1's input (forward), again for fc1_bwd, and dy for fc2_bwd;
  // reduce-scatters after fc2 and after fc1_bwd.
  CHECK(summary.collectives == 5);
  std::vector<std::string> order;
  for (const Node& n : g.nodes) order.push_back(n.op);
  CHECK(order == std::vector<std::string>{"relu", "all_gather", "matmul", "matmul",
                                          "reduce_scatter", "sum", "sum_bwd", "all_gather", "mm",
                                          "all_gather", "mm", "reduce_scatter"});
  // The input x has no sequence shard yet (no row-parallel node or
  // embedding before it), so it stays 64. Resident 192. At fc2_bwd: x 64,
  // h 128, dy 64 (made from the whole loss), dy gathered 64, dh 128, gw2 64:
  // 192 + 64 + 128 + 64 + 64 + 128 + 64 = 704. (The forward's highest,
  // at the reduce-scatter: 192 + x 64 + h 128 + y 64 + its shard 32 = 480.)
  CHECK(Peak(g) == 704);
  CHECK(g.tensors[5].bytes == 64);  // y: fc2's partial sums, whole
  CHECK(g.nodes[5].inputs.front() != 5);  // the loss reads y's shard
  CHECK(g.tensors[g.nodes[5].inputs.front()].bytes == 32);
}

TEST_CASE("tensor parallel: the structural rule on generate transformer") {
  const Graph g = Transformer(2);
  const std::vector<TpRole> vocab = FindTpRoles(g, "vocab");
  const std::vector<TpRole> replicated = FindTpRoles(g, "replicated");
  auto role = [&](const std::vector<TpRole>& roles, const std::string& name) {
    for (NodeId n = 0; n < g.nodes.size(); ++n) {
      if (g.nodes[n].name == name) return roles[n];
    }
    return TpRole::kReplicated;  // not found
  };
  CHECK(role(vocab, "h.0.attn.c_attn.addmm") == TpRole::kColumn);
  CHECK(role(vocab, "h.0.attn.c_proj.addmm") == TpRole::kRow);
  CHECK(role(vocab, "h.1.mlp.c_fc.addmm") == TpRole::kColumn);
  CHECK(role(vocab, "h.1.mlp.c_proj.addmm") == TpRole::kRow);
  CHECK(role(vocab, "lm_head") == TpRole::kColumn);
  CHECK(role(vocab, "wte") == TpRole::kRow);
  CHECK(role(vocab, "wpe") == TpRole::kAuto);  // reads no graph input
  CHECK(role(vocab, "h.0.attn.qk") == TpRole::kAuto);  // bmm of activations
  CHECK(role(replicated, "lm_head") == TpRole::kAuto);
  CHECK(role(replicated, "wte") == TpRole::kAuto);
  // 2 layers x 2 blocks: 4 columns and 4 rows, and the head and wte.
  int column = 0, row = 0;
  for (TpRole r : vocab) {
    column += r == TpRole::kColumn;
    row += r == TpRole::kRow;
  }
  CHECK(column == 5);
  CHECK(row == 5);
}

TEST_CASE("tensor parallel: a graph with no parallel node is refused") {
  Graph g = TwoLinears();
  for (Node& n : g.nodes) n.tp = TpRole::kAuto;
  for (Node& n : g.nodes) n.scope = "";  // no block, so no rule applies
  ParallelLayout tp;
  tp.tp = 2;
  tp.tp_embedding = "replicated";  // else fc2 would be the head, split by vocabulary
  CHECK_THROWS_AS(TensorParallelGraph(g, tp), InputError);
}

// Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022), section 4, with 16-bit activations:
// per layer sbh(34 + 5as/h) bytes without parallelism, sbh(10 + 24/t +
// 5as/(ht)) with tensor parallelism of t, sbh(34 + 5as/h) / t with sequence
// parallelism too. Here s = 64, b = 2, h = 64, a = 4, t = 2:
// sbh = 8192, as^2b = 4 * 64 * 64 * 2 = 32768 (5as/h * sbh = 5as^2b).
//
// The paper's layer and `generate transformer`'s differ in five places, each
// a term below (every other tensor is the paper's, byte for byte: the QKV
// input 2sbh, Q, K and V 6sbh, softmax output 2as^2b, its dropout mask as^2b
// and output 2as^2b, the projection input 2sbh, the fc1 input 2sbh, the GELU
// input 8sbh, the fc2 input 8sbh, two dropout masks sbh each):
//  (1) autocast runs LayerNorm in fp32: each LayerNorm saves its input cast
//      to fp32, 4sbh where the paper has 2sbh: +2sbh twice = +4sbh;
//  (2) GPT-2's tanh GELU is decomposed (not fused): its backward reads the
//      half (x/2) and the tanh as well as the input, 8sbh each: +16sbh;
//  (3) each LayerNorm saves its fp32 mean and rstd, 8 bytes per token
//      (the paper leaves them out as small): +2 * 8sb = +16sb;
//  (4) the attention scale 1/sqrt(d) is a saved 16-bit scalar (the div's
//      backward reads it): +2 bytes;
//  (5) autocast casts the fp32 weights to 16 bits and each matmul's
//      backward reads the cast copy (the paper's weights are 16-bit
//      parameters): QKV 3h^2, projection h^2, fc1 and fc2 4h^2 each, 2 bytes
//      an element: +24h^2 = 24 * 4096 = 98304 bytes.
TEST_CASE("Korthikanti et al.: per-layer activation bytes, no parallelism") {
  const int64_t sbh = 64 * 2 * 64, sb = 64 * 2, as2b = 4 * 64 * 64 * 2;
  const int64_t paper = 34 * sbh + 5 * as2b;  // 278528 + 163840 = 442368
  ParallelLayout none;
  const int64_t weights = 24 * 64 * 64;
  // 442368 + (1) 32768 + (2) 131072 + (3) 2048 + (4) 2 + (5) 98304 = 706562
  CHECK(PerLayer(none) == paper + 4 * sbh + 16 * sbh + 16 * sb + 2 + weights);
  CHECK(PerLayer(none) == 706562);
}

TEST_CASE("Korthikanti et al.: per-layer activation bytes, tensor parallel t = 2") {
  const int64_t sbh = 8192, sb = 128, as2b = 32768, t = 2;
  // sbh(10 + 24/t + 5as/(ht)) = 8192 * 22 + 5 * 32768 / 2 = 180224 + 81920
  const int64_t paper = sbh * (10 + 24 / t) + 5 * as2b / t;
  CHECK(paper == 262144);
  ParallelLayout tp;
  tp.tp = 2;
  // The terms, under TP: (1) the fp32 LayerNorm inputs are replicated,
  // +4sbh = 32768; (2) the GELU's half and tanh are in the MLP's sharded
  // region, +16sbh/t = 65536; (3) the LayerNorm stats are replicated,
  // +16sb = 2048; (4) the scalar is on every rank, +2; (5) each rank casts
  // its shard of the four weights, +24h^2/t = 49152.
  // 262144 + 32768 + 65536 + 2048 + 2 + 49152 = 411650
  const int64_t weights = 24 * 64 * 64 / t;
  CHECK(PerLayer(tp) == paper + 4 * sbh + 16 * sbh / t + 16 * sb + 2 + weights);
  CHECK(PerLayer(tp) == 411650);
}

TEST_CASE("Korthikanti et al.: per-layer activation bytes, tensor and sequence parallel t = 2") {
  const int64_t sbh = 8192, sb = 128, as2b = 32768, t = 2;
  const int64_t paper = (34 * sbh + 5 * as2b) / t;  // 442368 / 2 = 221184
  ParallelLayout sp;
  sp.tp = 2;
  sp.sp = true;
  // Every term is on sequence or tensor shards but the scalar: (1) + (2) +
  // (3) = (32768 + 131072 + 2048) / 2 = 82944; (4) +2; (5) the weight
  // shards' casts, 98304 / 2 = 49152. The gathered inputs of the
  // column-parallel linears are not saved (Megatron saves the shard and
  // gathers it again in backward), so they add nothing here.
  // 221184 + 82944 + 2 + 49152 = 353282
  const int64_t weights = 24 * 64 * 64 / t;
  CHECK(PerLayer(sp) == paper + (4 * sbh + 16 * sbh + 16 * sb) / t + 2 + weights);
  CHECK(PerLayer(sp) == 353282);
}

}  // namespace ckptplan
