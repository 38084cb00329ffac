// Graphs and references for the simulator's and planner's tests: steps made
// of parts, random steps, small transformers, and reference computations.
#ifndef CKPTPLAN_TESTS_TEST_GRAPHS_H_
#define CKPTPLAN_TESTS_TEST_GRAPHS_H_

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/sim/simulator.h"
#include "ir_graphs.h"

namespace ckptplan::testing {

// The steps of `parts` run one after another, as gradient accumulation runs
// microbatches: tensors and nodes are renamed "pI." and nothing is shared, so
// each part is a region of the result (FindRegions).
inline Graph Concatenate(const std::vector<Graph>& parts) {
  Graph out;
  out.source = "concatenated.json";
  for (size_t i = 0; i < parts.size(); ++i) {
    const Graph& part = parts[i];
    const std::string prefix = "p" + std::to_string(i) + ".";
    const TensorId base = static_cast<TensorId>(out.tensors.size());
    for (Tensor tensor : part.tensors) {
      tensor.name = prefix + tensor.name;
      if (tensor.alias_of != kNoId) tensor.alias_of += base;
      out.tensors.push_back(std::move(tensor));
    }
    for (Node node : part.nodes) {
      node.name = prefix + node.name;
      for (TensorId& t : node.inputs) t += base;
      for (TensorId& t : node.outputs) t += base;
      out.nodes.push_back(std::move(node));
    }
    TrainingState& training = out.training;
    training.optimizer = part.training.optimizer;
    // Saturating, as the loaders count: a graph may declare 2^63-1 parameters
    // (json_graph_fuzzer found the overflow; tests/fuzz/seeds/graph/).
    training.parameter_count = SaturatingAdd(training.parameter_count, part.training.parameter_count);
    training.extra_parameter_bytes =
        SaturatingAdd(training.extra_parameter_bytes, part.training.extra_parameter_bytes);
    training.extra_buffer_bytes =
        SaturatingAdd(training.extra_buffer_bytes, part.training.extra_buffer_bytes);
    training.extra_optimizer_bytes =
        SaturatingAdd(training.extra_optimizer_bytes, part.training.extra_optimizer_bytes);
  }
  out.Finalize();
  return out;
}

// A small random step that varies with `seed`: `min_layers` to
// min_layers + 3 layers of 1 to 3 nodes, Adam state on even seeds.
inline Graph RandomStep(uint64_t seed, int min_layers) {
  RandomGraphOptions options;
  options.seed = seed;
  options.layers = min_layers + static_cast<int>(seed % 4);
  options.width = 1 + static_cast<int>(seed % 3);
  options.optimizer = seed % 2 == 0;
  return RandomTrainingGraph(options);
}

// A wide, long-edged random DAG, as bench_scale.py's random family (10 nodes
// a layer, up to 3 activation inputs, 1 kB to 100 kB each): at half its
// save-all peak the greedy stalls among tied peaks.
inline Graph WideRandomGraph(uint64_t seed, int layers) {
  RandomGraphOptions options;
  options.seed = seed;
  options.layers = layers;
  options.width = 10;
  options.max_inputs = 3;
  options.min_bytes = 1000;
  options.max_bytes = 100000;
  return RandomTrainingGraph(options);
}

// A transformer small enough to simulate thousands of times.
inline Graph SmallTransformer(int microbatches, int layers = 2) {
  TransformerOptions options;
  options.layers = layers;
  options.microbatches = microbatches;
  options.batch = 2;
  options.seq = 8;
  options.hidden = 16;
  options.heads = 2;
  options.vocab = 50;
  return TransformerGraph(options);
}

// A layer norm's output viewed by a matmul: ln makes n and its statistics
// st; t views n. Under LayerNormViewPlan (t, n and st dropped), mm_bwd's
// chain re-runs ln (copies of n and st) and vt, and ln_bwd reads st's copy.
// Re-saving t takes the chain away, but ln_bwd still reads st's copy, so ln
// re-runs before it (DropDelta's moved nodes) and makes n's copy again,
// which nothing reads: t's reads read the original. (A traced GPT-2's
// layer norms and their views have this shape.)
inline Graph LayerNormViewGraph() {
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  return GraphBuilder()
      .Tensor("x", 10, TensorKind::kInput)
      .Tensor("a", 100)
      .Tensor("n", 100)
      .Tensor("st", 8)
      .Tensor("t", 100, TensorKind::kActivation, "n")
      .Tensor("o", 50).Tensor("l", 1).Tensor("dl", 4).Tensor("dt", 4)
      .Tensor("dn", 4).Tensor("da", 4)
      .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
      .Node("ln", "layer_norm", kF, {"a"}, {"n", "st"}, 3)
      .Node("vt", "view", kF, {"n"}, {"t"}, 0)
      .Node("mm", "mm", kF, {"t"}, {"o"}, 2)
      .Node("loss", "sum", kF, {"o"}, {"l"}, 1)
      .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
      .Node("mm_bwd", "mm_bwd", kB, {"dl", "t"}, {"dt"}, 1)
      .Node("vt_bwd", "view_bwd", kB, {"dt"}, {"dn"}, 1)
      .Node("ln_bwd", "layer_norm_bwd", kB, {"dn", "a", "st"}, {"da"}, 1)
      .Node("fa_bwd", "relu_bwd", kB, {"da", "x"}, {}, 1)
      .Build();
}
inline SaveSet LayerNormViewPlan(const Graph& graph) {
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "t")] = keep[Id(graph, "n")] = keep[Id(graph, "st")] = 0;
  return keep;
}

// The step's regions (FindRegions) and then the whole step, as ranges to
// simulate.
inline std::vector<Region> RegionsAndStep(const SimContext& context) {
  std::vector<Region> ranges = context.regions();
  ranges.push_back({0, static_cast<NodeId>(context.graph.nodes.size())});
  return ranges;
}

// `count` copies of `step`, run one after another (see Concatenate).
inline Graph Copies(const Graph& step, size_t count) {
  return Concatenate(std::vector<Graph>(count, step));
}

// A deep, narrow random DAG (100 layers of 3): inputs from many layers back
// make storages whose earlier reads lie far back (DropDelta's per-root index).
inline Graph DeepRandomGraph(uint64_t seed) {
  RandomGraphOptions options;
  options.seed = seed;
  options.layers = 100;
  options.width = 3;
  options.max_inputs = 3;
  options.optimizer = seed % 2 == 0;
  return RandomTrainingGraph(options);
}

// Save-all and random plans of `graph` (SimContext `context`), each droppable
// candidate dropped with probability 0 (save-all, once), 1/4, 1/2 and 3/4
// (three plans each): `visit(keep, random)`, `random` seeded with `seed`.
template <typename Visit>
void ForEachRandomPlan(const SimContext& context, uint64_t seed, Visit&& visit) {
  std::mt19937_64 random(seed);
  for (unsigned share : {0u, 25u, 50u, 75u}) {
    for (int round = 0; round < (share == 0 ? 1 : 3); ++round) {
      SaveSet keep = SaveAll(context.graph);
      for (TensorId t : context.droppable) keep[t] = random() % 100 >= share;
      visit(keep, random);
    }
  }
}

// The differential tests' corpus for single drops (DropDelta's scores and
// patches against simulations): 120 random training graphs of many shapes
// and sizes (small byte sizes make ties), small transformers (views,
// backward views of forward tensors, implicit gradients, microbatches) and
// concatenated random steps (several regions: offsets, storages read after a
// region). `visit(graph, seed, name)`; the seed is for the plans drawn.
template <typename Visit>
void ForEachDropCorpusGraph(Visit&& visit) {
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    RandomGraphOptions options;
    options.seed = seed;
    options.layers = 3 + static_cast<int>(seed % 6) + (seed > 60 ? 6 : 0);
    options.width = 1 + static_cast<int>(seed % 4) + (seed > 60 ? 2 : 0);
    options.max_inputs = 1 + static_cast<int>(seed % 3);
    options.max_bytes = seed % 5 == 0 ? 10 : 1000;
    options.optimizer = seed % 2 == 0;
    visit(RandomTrainingGraph(options), seed, "random " + std::to_string(seed));
  }
  for (int layers : {1, 2, 3}) {
    for (int microbatches : {1, 2}) {
      visit(SmallTransformer(microbatches, layers), 100 + layers,
            "transformer " + std::to_string(layers) + "x" + std::to_string(microbatches));
    }
  }
  // Views that cost something, as a traced export's `_reshape_alias` does
  // (a re-save whose chain re-made one a later step reads pays its re-run).
  for (int layers : {1, 2, 3}) {
    Graph graph = SmallTransformer(1, layers);
    for (Node& node : graph.nodes) {
      bool views = node.phase == Phase::kForward && !node.outputs.empty();
      for (TensorId out : node.outputs) views = views && graph.tensors[out].alias_of != kNoId;
      if (views) node.flops = 3;
    }
    visit(graph, 200 + layers, "transformer " + std::to_string(layers) + "x1, costed views");
  }
  for (uint64_t seed = 300; seed < 310; ++seed) {
    visit(Concatenate({RandomStep(seed, 2), RandomStep(seed + 1, 3)}), seed,
          "concatenated " + std::to_string(seed));
  }
  // Gradients not in the graph (a JSON graph without gradient tensors):
  // their bytes start at the first backward node's own step.
  for (uint64_t seed = 400; seed < 420; ++seed) {
    RandomGraphOptions options;
    options.seed = seed;
    options.layers = 3 + static_cast<int>(seed % 5);
    options.width = 1 + static_cast<int>(seed % 3);
    options.max_inputs = 1 + static_cast<int>(seed % 3);
    Graph graph = RandomTrainingGraph(options);
    graph.training.implicit_gradient_bytes = 50 * static_cast<int64_t>(seed % 7 + 1);
    visit(graph, seed, "random " + std::to_string(seed) + ", implicit gradients");
  }
}

// The cleanup as cleanup.h states it, re-simulating the whole step for every
// re-save: the reference for ResaveDropped's floors and region simulations.
inline SaveSet PlainCleanup(const Graph& graph, SaveSet keep, int64_t budget) {
  SimOptions options;
  SimResult current = Simulate(graph, keep, options);
  bool changed = current.peak_bytes <= budget;
  while (changed) {
    changed = false;
    std::vector<std::pair<double, TensorId>> gains;  // (cost removed, tensor)
    for (TensorId t : SaveCandidates(graph)) {
      if (keep[t]) continue;
      keep[t] = 1;
      SimResult trial = Simulate(graph, keep, options);
      keep[t] = 0;
      if (trial.peak_bytes <= budget) {
        gains.push_back({current.recompute_cost - trial.recompute_cost, t});
      }
    }
    std::sort(gains.begin(), gains.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    for (const auto& [gain, t] : gains) {
      keep[t] = 1;
      SimResult trial = Simulate(graph, keep, options);
      if (trial.peak_bytes > budget || trial.recompute_cost > current.recompute_cost) {
        keep[t] = 0;
        continue;
      }
      current = std::move(trial);
      changed = true;
    }
  }
  return keep;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_TEST_GRAPHS_H_
