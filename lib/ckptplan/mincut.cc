#include "ckptplan/mincut.h"

#include <deque>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, int64_t,
        boost::property<boost::edge_residual_capacity_t, int64_t,
                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
using Vertex = Traits::vertex_descriptor;

constexpr Vertex kSource = 0;
constexpr Vertex kSink = 1;
Vertex In(TensorId t) { return 2 + 2 * static_cast<Vertex>(t); }
Vertex Out(TensorId t) { return 3 + 2 * static_cast<Vertex>(t); }

class Network {
 public:
  explicit Network(size_t num_tensors) : graph_(2 + 2 * num_tensors) {}

  void AddEdge(Vertex from, Vertex to, int64_t capacity) {
    auto forward = boost::add_edge(from, to, graph_).first;
    auto backward = boost::add_edge(to, from, graph_).first;
    auto cap = boost::get(boost::edge_capacity, graph_);
    auto rev = boost::get(boost::edge_reverse, graph_);
    cap[forward] = capacity;
    cap[backward] = 0;
    rev[forward] = backward;
    rev[backward] = forward;
  }

  int64_t MaxFlow() { return boost::push_relabel_max_flow(graph_, kSource, kSink); }

  // Vertices reachable from the source through edges with residual capacity.
  std::vector<uint8_t> SourceSide() const {
    std::vector<uint8_t> seen(boost::num_vertices(graph_), 0);
    auto residual = boost::get(boost::edge_residual_capacity, graph_);
    std::deque<Vertex> queue{kSource};
    seen[kSource] = 1;
    while (!queue.empty()) {
      Vertex v = queue.front();
      queue.pop_front();
      for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
        Vertex w = boost::target(*e, graph_);
        if (seen[w] || residual[*e] <= 0) continue;
        seen[w] = 1;
        queue.push_back(w);
      }
    }
    return seen;
  }

 private:
  FlowGraph graph_;
};

// Non-resident storage made by a forward node: what the network models.
bool IsForwardActivation(const Graph& graph, TensorId t) {
  NodeId p = graph.tensors[t].producer;
  if (p == kNoId || graph.nodes[p].phase != Phase::kForward) return false;
  return !IsResidentKind(graph.tensors[graph.StorageRoot(t)].kind);
}

}  // namespace

MinCutResult MinCutStart(const Graph& graph, const RecomputePolicy& policy) {
  const size_t num_tensors = graph.tensors.size();
  const std::vector<TensorId> candidates = SaveCandidates(graph);
  std::vector<uint8_t> is_candidate(num_tensors, 0);
  int64_t infinity = 1;
  for (TensorId t : candidates) {
    is_candidate[t] = 1;
    infinity += graph.tensors[graph.StorageRoot(t)].bytes;
  }
  Network network(num_tensors);
  for (TensorId t = 0; t < num_tensors; ++t) {
    if (!IsForwardActivation(graph, t)) continue;
    const int64_t bytes = graph.tensors[graph.StorageRoot(t)].bytes;
    network.AddEdge(In(t), Out(t), is_candidate[t] ? bytes : infinity);
    if (!policy.Allows(graph.nodes[graph.tensors[t].producer].op)) {
      network.AddEdge(kSource, In(t), infinity);
    }
    if (is_candidate[t]) network.AddEdge(Out(t), kSink, infinity);
  }
  for (const Node& node : graph.nodes) {
    if (node.phase != Phase::kForward) continue;
    for (TensorId a : node.inputs) {
      if (!IsForwardActivation(graph, a)) continue;
      for (TensorId b : node.outputs) {
        if (IsForwardActivation(graph, b)) network.AddEdge(Out(a), In(b), infinity);
      }
    }
  }
  MinCutResult result;
  result.cut_bytes = network.MaxFlow();
  const std::vector<uint8_t> source_side = network.SourceSide();
  result.keep = SaveAll(graph);
  for (TensorId t : candidates) {
    // A candidate whose t_in is on the sink side is recomputed; t_out can
    // never be on the source side (it reaches the sink with infinite capacity).
    if (source_side[In(t)]) {
      result.saved.push_back(t);
    } else {
      result.keep[t] = 0;
      result.dropped.push_back(t);
    }
  }
  spdlog::info("mincut: {} of {} candidates saved ({} bytes), {} recomputed", result.saved.size(),
               candidates.size(), result.cut_bytes, result.dropped.size());
  return result;
}

}  // namespace ckptplan
