#include "ckptplan/plan/mincut.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string_view>
#include <unordered_map>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <spdlog/spdlog.h>

#include "ckptplan/base/console.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

// Edges are collected first and the flow network is built once as a
// compressed sparse row graph: adjacency_list allocates every edge's
// properties on their own, which cost more than the flow on large graphs.
struct Arc {
  int64_t capacity = 0;
  int64_t residual = 0;
};
using FlowGraph =
    boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, Arc, boost::no_property,
                                       uint32_t, uint32_t>;
using Vertex = uint32_t;

constexpr Vertex kSource = 0;
constexpr Vertex kSink = 1;
// Vertices of the tensor with local index `i` in its region's network.
Vertex In(uint32_t i) { return 2 + 2 * i; }
Vertex Out(uint32_t i) { return 3 + 2 * i; }

class Network {
 public:
  explicit Network(size_t num_tensors) : num_vertices_(2 + 2 * num_tensors) {}

  void AddEdge(Vertex from, Vertex to, int64_t capacity) {
    ends_.emplace_back(from, to);
    ends_.emplace_back(to, from);
    capacities_.push_back(capacity);
  }

  int64_t MaxFlow() {
    // Arcs sorted by source (a counting sort, stable), as the graph stores them.
    std::vector<uint32_t> start(num_vertices_ + 1, 0);
    for (const auto& [from, to] : ends_) ++start[from + 1];
    for (size_t v = 0; v < num_vertices_; ++v) start[v + 1] += start[v];
    std::vector<uint32_t> position(ends_.size());
    std::vector<std::pair<Vertex, Vertex>> sorted(ends_.size());
    std::vector<Arc> arcs(ends_.size());
    for (size_t i = 0; i < ends_.size(); ++i) {
      const uint32_t at = position[i] = start[ends_[i].first]++;
      sorted[at] = ends_[i];
      arcs[at].capacity = i % 2 == 0 ? capacities_[i / 2] : 0;
    }
    graph_ = FlowGraph(boost::edges_are_sorted, sorted.begin(), sorted.end(), arcs.begin(),
                       num_vertices_);
    // An arc's descriptor is its source and its place in that order.
    reverse_.resize(ends_.size());
    for (size_t i = 0; i < ends_.size(); ++i) {
      const size_t other = i ^ 1;  // the other arc of the same edge
      reverse_[position[i]] = FlowGraph::edge_descriptor(ends_[other].first, position[other]);
    }
    // Any maximum flow leaves the same minimal source side (SourceSide);
    // Boykov-Kolmogorov ran faster than push-relabel here and needs less
    // working memory (GPT-2: 1.2 against 1.8 ms).
    return boost::boykov_kolmogorov_max_flow(
        graph_, boost::get(&Arc::capacity, graph_), boost::get(&Arc::residual, graph_),
        boost::make_iterator_property_map(reverse_.begin(),
                                          boost::get(boost::edge_index, graph_)),
        boost::get(boost::vertex_index, graph_), kSource, kSink);
  }

  // Vertices reachable from the source through edges with residual capacity.
  std::vector<uint8_t> SourceSide() const {
    std::vector<uint8_t> seen(num_vertices_, 0);
    std::vector<Vertex> queue{kSource};
    seen[kSource] = 1;
    for (size_t next = 0; next < queue.size(); ++next) {
      for (auto [e, end] = boost::out_edges(queue[next], graph_); e != end; ++e) {
        const Vertex w = boost::target(*e, graph_);
        if (seen[w] || graph_[*e].residual <= 0) continue;
        seen[w] = 1;
        queue.push_back(w);
      }
    }
    return seen;
  }

 private:
  size_t num_vertices_;
  std::vector<std::pair<Vertex, Vertex>> ends_;  // both arcs of every edge
  std::vector<int64_t> capacities_;             // per edge, of its forward arc
  FlowGraph graph_;
  std::vector<FlowGraph::edge_descriptor> reverse_;  // by edge index
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
  // The policy by op name, looked up once per name.
  std::unordered_map<std::string_view, bool> allowed;
  auto allows = [&](const std::string& op) {
    auto [it, added] = allowed.try_emplace(op, false);
    if (added) it->second = policy.Allows(op) && !IsRandomOp(op);  // never, whatever it lists
    return it->second;
  };
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
      if (!allows(graph.nodes[graph.tensors[t].producer].op)) {
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
      if (context.is_candidate[t] && !context.pinned[t] && !source_side[In(local[t])]) {
        result.keep[t] = 0;
      }
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
