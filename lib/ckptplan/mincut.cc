#include "ckptplan/mincut.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <spdlog/spdlog.h>

#include "ckptplan/console.h"
#include "ckptplan/simulator.h"

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
// Vertices of the tensor with local index `i` in its region's network.
Vertex In(uint32_t i) { return 2 + 2 * static_cast<Vertex>(i); }
Vertex Out(uint32_t i) { return 3 + 2 * static_cast<Vertex>(i); }

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
  return MinCutStart(SimContext(graph), policy);
}

MinCutResult MinCutStart(const SimContext& context, const RecomputePolicy& policy) {
  const Graph& graph = context.graph;
  const auto started = std::chrono::steady_clock::now();
  const size_t num_tensors = graph.tensors.size();
  MinCutResult result;
  result.keep = SaveAll(graph);
  // Regions (FindRegions) share no forward data flow, so their networks are
  // separate components: each is cut on its own, which keeps the network
  // small. The source side of the minimal min cut is the same either way.
  // Copies of a region (ShapeRegions, e.g. microbatches) are cut alike: the
  // first of each shape is cut, the others copy its cut.
  std::vector<uint32_t> local(num_tensors, kNoId);
  std::vector<TensorId> tensors;
  const std::vector<Region>& regions = context.regions();
  const std::vector<RegionShape>& shapes = context.shapes();
  std::vector<int64_t> region_cut(regions.size(), 0);
  size_t copied = 0;
  for (size_t r = 0; r < regions.size(); ++r) {
    const Region& region = regions[r];
    const RegionShape& shape = shapes[r];
    if (shape.first_of_shape != r) {
      for (NodeId n = region.first; n < region.end; ++n) {
        for (TensorId t : graph.nodes[n].outputs) {
          if (context.is_candidate[t]) {
            result.keep[t] = result.keep[static_cast<TensorId>(t - shape.tensor_shift)];
          }
        }
      }
      region_cut[r] = region_cut[shape.first_of_shape];
      result.cut_bytes += region_cut[r];
      ++copied;
      continue;
    }
    tensors.clear();
    int64_t infinity = 1;
    for (NodeId n = region.first; n < region.end; ++n) {
      for (TensorId t : graph.nodes[n].outputs) {
        if (!IsForwardActivation(graph, t) || local[t] != kNoId) continue;
        local[t] = static_cast<uint32_t>(tensors.size());
        tensors.push_back(t);
        if (context.is_candidate[t]) infinity += graph.tensors[context.root[t]].bytes;
      }
    }
    if (tensors.empty()) continue;
    std::sort(tensors.begin(), tensors.end());
    for (uint32_t i = 0; i < tensors.size(); ++i) local[tensors[i]] = i;
    Network network(tensors.size());
    for (TensorId t : tensors) {
      const int64_t bytes = graph.tensors[context.root[t]].bytes;
      network.AddEdge(In(local[t]), Out(local[t]), context.is_candidate[t] ? bytes : infinity);
      if (!policy.Allows(graph.nodes[graph.tensors[t].producer].op)) {
        network.AddEdge(kSource, In(local[t]), infinity);
      }
      if (context.is_candidate[t]) network.AddEdge(Out(local[t]), kSink, infinity);
    }
    for (NodeId n = region.first; n < region.end; ++n) {
      const Node& node = graph.nodes[n];
      if (node.phase != Phase::kForward) continue;
      for (TensorId a : node.inputs) {
        if (!IsForwardActivation(graph, a)) continue;
        for (TensorId b : node.outputs) {
          if (IsForwardActivation(graph, b)) network.AddEdge(Out(local[a]), In(local[b]), infinity);
        }
      }
    }
    region_cut[r] = network.MaxFlow();
    result.cut_bytes += region_cut[r];
    const std::vector<uint8_t> source_side = network.SourceSide();
    // A candidate whose t_in is on the sink side is recomputed; t_out can
    // never be on the source side (it reaches the sink with infinite capacity).
    for (TensorId t : tensors) {
      if (context.is_candidate[t] && !source_side[In(local[t])]) result.keep[t] = 0;
    }
  }
  for (TensorId t : context.candidates) {
    (result.keep[t] ? result.saved : result.dropped).push_back(t);
  }
  spdlog::info(
      "mincut: {} of {} candidates saved ({} bytes), {} recomputed; {} regions, {} cut as copies "
      "of another ({:.3f} s)",
      result.saved.size(), context.candidates.size(), result.cut_bytes, result.dropped.size(),
      regions.size(), copied, SecondsSince(started));
  return result;
}

}  // namespace ckptplan
