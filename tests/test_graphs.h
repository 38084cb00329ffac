// Graphs and references for the simulator's and planner's tests: steps made
// of parts, random steps, small transformers, and reference computations.
#ifndef CKPTPLAN_TESTS_TEST_GRAPHS_H_
#define CKPTPLAN_TESTS_TEST_GRAPHS_H_

#include <algorithm>
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
    training.parameter_count += part.training.parameter_count;
    training.extra_parameter_bytes += part.training.extra_parameter_bytes;
    training.extra_buffer_bytes += part.training.extra_buffer_bytes;
    training.extra_optimizer_bytes += part.training.extra_optimizer_bytes;
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

// The step's regions (FindRegions) and then the whole step, as ranges to
// simulate.
inline std::vector<Region> RegionsAndStep(const SimContext& context) {
  std::vector<Region> ranges = context.regions();
  ranges.push_back({0, static_cast<NodeId>(context.graph.nodes.size())});
  return ranges;
}

// Where two simulations first differ, step by step, storage by storage and
// recompute by recompute, then in totals, node peaks, peak and cost; empty
// when they are the same.
inline std::string SimulationDifference(const SimResult& a, const SimResult& b) {
  auto at = [](const char* what, size_t i) { return std::string(what) + " " + std::to_string(i); };
  if (a.steps.size() != b.steps.size()) return "step count";
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step &x = a.steps[i], &y = b.steps[i];
    if (x.node != y.node || x.recompute != y.recompute || x.starts_chain != y.starts_chain) {
      return at("step", i);
    }
  }
  if (a.buffers.size() != b.buffers.size()) return "storage count";
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer &x = a.buffers[i], &y = b.buffers[i];
    if (x.root != y.root || x.category != y.category || x.first_step != y.first_step ||
        x.last_step != y.last_step) {
      return at("storage", i);
    }
  }
  if (a.recomputes.size() != b.recomputes.size()) return "recompute count";
  for (size_t i = 0; i < a.recomputes.size(); ++i) {
    if (a.recomputes[i].tensor != b.recomputes[i].tensor ||
        a.recomputes[i].chain != b.recomputes[i].chain) {
      return at("recompute", i);
    }
  }
  if (a.total != b.total) return "totals";
  if (a.node_peak != b.node_peak) return "node peaks";
  if (a.peak_bytes != b.peak_bytes) return "peak";
  if (a.recompute_cost != b.recompute_cost) return "recompute cost";
  return "";
}

// `count` copies of `step`, run one after another (see Concatenate).
inline Graph Copies(const Graph& step, size_t count) {
  return Concatenate(std::vector<Graph>(count, step));
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
