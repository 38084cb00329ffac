// Small hand-made graphs built in the IR (no loader), so that the
// simulator's tests need nothing above it; json_graphs.h has the JSON text of
// the same graphs for the loader's tests.
#ifndef CKPTPLAN_TESTS_IR_GRAPHS_H_
#define CKPTPLAN_TESTS_IR_GRAPHS_H_

#include <string>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"

namespace ckptplan::testing {

inline TensorId Id(const Graph& graph, const std::string& name) {
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].name == name) return t;
  }
  return kNoId;
}

/// Builds a graph by names, in the IR: tensors first, then nodes in
/// execution order. Build() finalizes and validates it as a loader would.
class GraphBuilder {
 public:
  GraphBuilder& Tensor(const std::string& name, int64_t bytes,
                       TensorKind kind = TensorKind::kActivation,
                       const std::string& alias_of = "") {
    ckptplan::Tensor tensor;
    tensor.name = name;
    tensor.bytes = bytes;
    tensor.kind = kind;
    if (!alias_of.empty()) tensor.alias_of = Id(graph_, alias_of);
    graph_.tensors.push_back(std::move(tensor));
    return *this;
  }
  GraphBuilder& Node(const std::string& name, const std::string& op, Phase phase,
                     const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, double flops = -1,
                     int64_t workspace_bytes = 0) {
    ckptplan::Node node;
    node.name = name;
    node.op = op;
    node.phase = phase;
    for (const std::string& t : inputs) node.inputs.push_back(Id(graph_, t));
    for (const std::string& t : outputs) node.outputs.push_back(Id(graph_, t));
    node.flops = flops;
    node.workspace_bytes = workspace_bytes;
    graph_.nodes.push_back(std::move(node));
    return *this;
  }
  TrainingState& training() { return graph_.training; }
  Graph Build() {
    graph_.source = "built.json";
    graph_.Finalize();
    ValidateGraph(graph_);
    return graph_;
  }

 private:
  Graph graph_;
};

/// Builds a graph by ids, for tests whose nodes carry module scopes (the
/// distributed layouts cut a step by scope): Tensor() returns the new
/// tensor's id, Node() appends a node of op "op" in execution order with
/// `flops` (-1: not given). Build() finalizes without validating.
class ScopedGraphBuilder {
 public:
  explicit ScopedGraphBuilder(std::string source, double flops = -1) : flops_(flops) {
    graph_.source = std::move(source);
  }
  TensorId Tensor(const std::string& name, int64_t bytes, TensorKind kind) {
    graph_.tensors.push_back({name, bytes, kind, kNoId, kNoId});
    return static_cast<TensorId>(graph_.tensors.size() - 1);
  }
  void Node(const std::string& name, const std::string& scope, Phase phase,
            std::vector<TensorId> inputs, std::vector<TensorId> outputs) {
    ckptplan::Node node;
    node.name = name;
    node.op = "op";
    node.scope = scope;
    node.phase = phase;
    node.inputs = std::move(inputs);
    node.outputs = std::move(outputs);
    node.flops = flops_;
    graph_.nodes.push_back(std::move(node));
  }
  Graph Build() {
    graph_.Finalize();
    return graph_;
  }

 private:
  Graph graph_;
  double flops_;
};

// x -> f -> a -> g -> b -> h -> loss; the backward reads b (h_bwd) and a
// (g_bwd). Resident: x 100 + w 8 + Adam state 2 params x 8 B = 124 bytes.
// json_graphs.h's kChainGraph is the same graph as JSON.
inline Graph ChainGraph() {
  constexpr Phase F = Phase::kForward, B = Phase::kBackward, O = Phase::kOptimizer;
  GraphBuilder b;
  b.Tensor("x", 100, TensorKind::kInput).Tensor("w", 8, TensorKind::kParameter);
  b.Tensor("a", 1000).Tensor("b", 2000).Tensor("loss", 4).Tensor("db", 2000).Tensor("da", 1000);
  b.Tensor("dw", 8, TensorKind::kGradient);
  b.Node("f", "matmul", F, {"x", "w"}, {"a"}, 100).Node("g", "matmul", F, {"a"}, {"b"}, 200);
  b.Node("h", "loss", F, {"b"}, {"loss"}, 10).Node("h_bwd", "loss_bwd", B, {"b"}, {"db"}, 10);
  b.Node("g_bwd", "mm_bwd", B, {"db", "a"}, {"da"}, 400);
  b.Node("f_bwd", "mm_bwd", B, {"da", "x"}, {"dw"}, 200);
  b.Node("opt", "adam", O, {"w", "dw"}, {});
  // What the JSON loader derives from "optimizer": "adam" and w's 8 bytes:
  // 2 fp32 parameters, 8 B of Adam moments each.
  TrainingState& training = b.training();
  training.optimizer = "adam";
  training.parameter_count = 2;
  training.optimizer_bytes_per_param = 8;
  training.extra_optimizer_bytes = 16;
  return b.Build();
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_IR_GRAPHS_H_
