#include "ckptplan/incremental.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
// Recomputed nodes a bound walks through before giving up on pulled inputs.
constexpr size_t kMaxPulledWalk = 16;

// The reference's ordering of drops (selector.cc): tier, then score, then
// bytes freed, then id. Must stay identical to it; the differential test in
// tests/incremental_test.cc checks that.
struct Choice {
  TensorId tensor = kNoId;
  int tier = 2;       // 0: lowers the peak; 1: flattens a tied peak
  double score = 0;   // added cost per byte freed
  int64_t freed = 0;  // bytes freed (tier 0: at the peak; tier 1: at peak nodes)

  bool BetterThan(const Choice& other) const {
    if (other.tensor == kNoId) return true;
    if (tier != other.tier) return tier < other.tier;
    if (score != other.score) return score < other.score;
    if (freed != other.freed) return freed > other.freed;
    return tensor < other.tensor;
  }
};

size_t CountAtPeak(const SimResult& sim) {
  return static_cast<size_t>(
      std::count(sim.node_peak.begin(), sim.node_peak.end(), sim.peak_bytes));
}

// Scores dropping `t` exactly as selector.cc does.
Choice Score(TensorId t, const SimResult& current, const SimResult& trial) {
  Choice choice;
  if (trial.peak_bytes > current.peak_bytes) return choice;
  double added_cost = std::max(0.0, trial.recompute_cost - current.recompute_cost);
  if (trial.peak_bytes < current.peak_bytes) {
    choice.tier = 0;
    choice.freed = current.peak_bytes - trial.peak_bytes;
  } else {
    if (CountAtPeak(trial) >= CountAtPeak(current)) return choice;
    for (size_t n = 0; n < current.node_peak.size(); ++n) {
      if (current.node_peak[n] != current.peak_bytes) continue;
      choice.freed += std::max<int64_t>(0, current.node_peak[n] - trial.node_peak[n]);
    }
    if (choice.freed <= 0) return choice;
    choice.tier = 1;
  }
  choice.score = added_cost / static_cast<double>(choice.freed);
  choice.tensor = t;
  return choice;
}

// Facts no plan changes.
struct StaticInfo {
  std::vector<TensorId> root;            // storage root per tensor
  std::vector<uint8_t> recomputable;     // forward-produced, storage not resident
  std::vector<uint8_t> resident_root;
  std::vector<double> node_cost;
  bool exact_costs = false;              // every cost sum is exact in a double
  std::vector<uint8_t> is_candidate;     // per tensor
  std::vector<NodeId> region_start;      // per root: last node that surely reads it
  std::vector<TensorId> candidates;
};

StaticInfo ComputeStaticInfo(const SimContext& context) {
  const Graph& graph = context.graph;
  StaticInfo info;
  const size_t num_tensors = graph.tensors.size();
  info.root = context.root;
  info.recomputable.assign(num_tensors, 0);
  info.is_candidate = context.is_candidate;
  info.resident_root = context.resident_root;
  info.node_cost = context.node_cost;
  // Integer costs summing below 2^53 add up exactly in any order, so the
  // chain's cost equals the difference of the two simulations' costs.
  info.exact_costs = context.step_cost <= 9007199254740992.0;
  for (NodeId n = 0; n < graph.nodes.size() && info.exact_costs; ++n) {
    double cost = graph.NodeCost(n);
    info.exact_costs = cost == std::floor(cost);
  }
  info.region_start.assign(num_tensors, 0);
  for (TensorId t = 0; t < num_tensors; ++t) {
    NodeId p = graph.tensors[t].producer;
    info.recomputable[t] = context.forward_produced[t] && !context.resident_root[t];
    // Only forward steps read the original whatever the plan.
    if (context.forward_produced[t]) {
      NodeId& start = info.region_start[info.root[t]];
      start = std::max(start, p);
    }
  }
  // Forward steps always read the original storage, whatever the plan.
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].phase != Phase::kForward) continue;
    for (TensorId in : graph.nodes[n].inputs) {
      NodeId& start = info.region_start[info.root[in]];
      start = std::max(start, n);
    }
  }
  info.candidates = context.candidates;
  return info;
}

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();

// Maximum over ranges of a fixed array.
class RangeMax {
 public:
  void Build(const std::vector<int64_t>& values) {
    size_ = values.size();
    tree_.assign(2 * size_, kLowest);
    std::copy(values.begin(), values.end(), tree_.begin() + size_);
    for (size_t i = size_; i-- > 1;) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  // Max over [lo, hi); kLowest when empty.
  int64_t Query(size_t lo, size_t hi) const {
    int64_t best = kLowest;
    for (lo += size_, hi += size_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::max(best, tree_[lo++]);
      if (hi & 1) best = std::max(best, tree_[--hi]);
    }
    return best;
  }

 private:
  size_t size_ = 0;
  std::vector<int64_t> tree_;
};

// Inclusive range of nodes; empty when lo > hi.
struct NodeRange {
  int64_t lo = 1, hi = 0;
  bool empty() const { return lo > hi; }
};

// What the current simulation says about where a drop can lower memory.
struct View {
  int64_t peak = 0;
  std::vector<NodeId> slot;            // per node: group it is re-run in; kNoId if not
  bool peak_at_node_step = false;      // some node peaks at its own (not a recompute) step
  bool all_peaks_at_node_step = false;  // every peak node does
  std::vector<NodeId> last_node;       // per root: node whose group last reads its original
  std::vector<NodeId> first_use;       // per tensor: first group a non-forward step reads it
  std::vector<int64_t> first_use_floor;  // per tensor: bytes at that step if it is the group's
                                         // own node (a recomputed copy is live there), else min
  std::vector<NodeId> last_use;        // per tensor: last group a non-forward step reads it
  // Per storage root, over its saved candidates: the latest last_use, which
  // candidate has it, and the latest among the others.
  std::vector<NodeId> family_last, family_second;
  std::vector<TensorId> family_last_tensor;
  RangeMax node_peak;                  // over nodes
  std::vector<uint32_t> peak_prefix;   // peak nodes in [0, n)
};

void BuildView(const Graph& graph, const StaticInfo& info, const SaveSet& keep,
               const SimResult& sim, View* view) {
  const size_t num_nodes = graph.nodes.size();
  view->peak = sim.peak_bytes;
  view->slot.assign(num_nodes, kNoId);
  std::vector<NodeId> group(sim.steps.size());
  size_t own_step_peaks = 0;
  NodeId next = num_nodes == 0 ? 0 : static_cast<NodeId>(num_nodes - 1);
  for (size_t s = sim.steps.size(); s-- > 0;) {
    const Step& step = sim.steps[s];
    if (!step.recompute) next = step.node;
    group[s] = next;
    if (step.recompute) {
      view->slot[step.node] = next;
    } else if (sim.total[s] == sim.peak_bytes) {
      view->peak_at_node_step = true;
      ++own_step_peaks;
    }
  }
  view->first_use.assign(graph.tensors.size(), kNoId);
  view->last_use.assign(graph.tensors.size(), kNoId);
  view->first_use_floor.assign(graph.tensors.size(), std::numeric_limits<int64_t>::min());
  for (size_t s = 0; s < sim.steps.size(); ++s) {
    const Step& step = sim.steps[s];
    const Node& node = graph.nodes[step.node];
    if (!step.recompute && node.phase == Phase::kForward) continue;
    for (TensorId in : node.inputs) {
      view->last_use[in] = group[s];
      if (view->first_use[in] != kNoId) continue;
      view->first_use[in] = group[s];
      if (!step.recompute) view->first_use_floor[in] = sim.total[s];
    }
  }
  view->last_node.assign(graph.tensors.size(), 0);
  for (const Buffer& buffer : sim.buffers) {
    if (sim.steps[buffer.first_step].recompute) continue;
    view->last_node[buffer.root] = group[buffer.last_step];
  }
  view->family_last.assign(graph.tensors.size(), kNoId);
  view->family_second.assign(graph.tensors.size(), kNoId);
  view->family_last_tensor.assign(graph.tensors.size(), kNoId);
  for (TensorId t : info.candidates) {
    if (!keep[t] || view->last_use[t] == kNoId) continue;
    const TensorId root = info.root[t];
    const NodeId last = view->last_use[t];
    NodeId& first = view->family_last[root];
    if (first == kNoId || last > first) {
      view->family_second[root] = first;
      first = last;
      view->family_last_tensor[root] = t;
    } else if (view->family_second[root] == kNoId || last > view->family_second[root]) {
      view->family_second[root] = last;
    }
  }
  view->all_peaks_at_node_step =
      own_step_peaks == static_cast<size_t>(std::count(sim.node_peak.begin(),
                                                       sim.node_peak.end(), sim.peak_bytes));
  view->node_peak.Build(sim.node_peak);
  view->peak_prefix.assign(num_nodes + 1, 0);
  for (size_t n = 0; n < num_nodes; ++n) {
    view->peak_prefix[n + 1] = view->peak_prefix[n] + (sim.node_peak[n] == sim.peak_bytes);
  }
}

// Best case of dropping one candidate, from the current simulation.
struct Bound {
  TensorId tensor = kNoId;
  double score = 0;           // no more than the real score
  int64_t freed = kUnbounded;  // no less than the real bytes freed
};

bool BoundBefore(const Bound& a, const Bound& b) {
  if (a.score != b.score) return a.score < b.score;
  if (a.freed != b.freed) return a.freed > b.freed;
  return a.tensor < b.tensor;
}

// A candidate whose bound does not beat `best` cannot beat it either: its
// score is at least the bound's and its bytes freed at most the bound's.
bool MayBeat(const Bound& bound, int tier, const Choice& best) {
  Choice optimistic{bound.tensor, tier, bound.score, bound.freed};
  return optimistic.BetterThan(best);
}

// Walks the nodes a drop of `t` would re-run: its producer and, through
// tensors neither saved nor resident, their producers. Nodes the current
// plan already re-runs are not added but make the drop "pulling".
class ChainWalker {
 public:
  ChainWalker(const Graph& graph, const StaticInfo& info)
      : graph_(graph), info_(info), mark_(graph.nodes.size(), 0) {}

  struct Chain {
    double cost = 0;             // of the nodes added to the recompute set
    bool pulls = false;          // reaches a node already in the recompute set
    NodeId last_slot = 0;        // latest group such a node is re-run in now
    int64_t pulled_inputs = 0;   // bytes of those nodes' inputs (they may free earlier)
    size_t pulled_nodes = 0;
  };

  // `slot` is View::slot; the recompute set is closed under this walk, so
  // nodes reached through a recomputed node are recomputed too.
  Chain Walk(TensorId t, const SaveSet& keep, const std::vector<NodeId>& slot) {
    ++epoch_;
    Chain chain;
    stack_.clear();
    Visit(graph_.tensors[t].producer, slot, &chain);
    while (!stack_.empty()) {
      NodeId n = stack_.back();
      stack_.pop_back();
      for (TensorId in : graph_.nodes[n].inputs) {
        if (slot[n] != kNoId && !info_.resident_root[in] && chain.pulled_inputs != kUnbounded) {
          chain.pulled_inputs += graph_.tensors[info_.root[in]].bytes;
        }
        if (!info_.recomputable[in] || (info_.is_candidate[in] && keep[in])) continue;
        Visit(graph_.tensors[in].producer, slot, &chain);
      }
    }
    return chain;
  }

 private:
  void Visit(NodeId n, const std::vector<NodeId>& slot, Chain* chain) {
    if (mark_[n] == epoch_) return;
    mark_[n] = epoch_;
    if (slot[n] != kNoId) {
      chain->pulls = true;
      // Slots only decrease towards the inputs, so the first recomputed
      // nodes reached give the latest slot; walking further only sums the
      // pulled inputs, which is capped (the bound then gives up on them).
      chain->last_slot = std::max(chain->last_slot, slot[n]);
      if (++chain->pulled_nodes > kMaxPulledWalk) {
        chain->pulled_inputs = kUnbounded;
        return;
      }
    } else {
      chain->cost += info_.node_cost[n];
    }
    stack_.push_back(n);
  }

  const Graph& graph_;
  const StaticInfo& info_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  std::vector<NodeId> stack_;
};

int64_t SaturatingMultiply(int64_t bytes, int64_t count) {
  if (bytes > 0 && count > kUnbounded / bytes) return kUnbounded;
  return bytes * count;
}

}  // namespace

GreedyResult IncrementalPlan(const Graph& graph, const SaveSet& start,
                             const GreedyOptions& options, IncrementalStats* stats) {
  IncrementalStats local_stats;
  IncrementalStats& counters = stats ? *stats : local_stats;
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  GreedyResult result;
  result.keep = start;
  const SimContext context(graph);
  SimResult current = Simulate(context, result.keep, sim_options);
  ++counters.simulations;
  result.start_peak = current.peak_bytes;

  const StaticInfo info = ComputeStaticInfo(context);
  ChainWalker walker(graph, info);
  const size_t num_nodes = graph.nodes.size();
  View view;
  std::vector<Bound> tier0, tier1;
  // Reused between iterations: fresh memory for every simulation is slow.
  SimResult trial, best_sim;
  std::vector<uint32_t> tried_at(graph.tensors.size(), UINT32_MAX);

  while (current.peak_bytes > options.budget_bytes) {
    const uint32_t iteration = static_cast<uint32_t>(counters.iterations++);
    BuildView(graph, info, result.keep, current, &view);
    tier0.clear();
    tier1.clear();
    for (TensorId t : info.candidates) {
      if (!result.keep[t]) continue;
      ++counters.bounded;
      const TensorId root = info.root[t];
      const int64_t bytes = graph.tensors[root].bytes;
      ChainWalker::Chain chain = walker.Walk(t, result.keep, view.slot);
      // Where the original storage can end earlier: after its forward reads
      // and the reads of the other saved tensors sharing it, and (the copy
      // taking over) before the first non-forward use of `t`.
      NodeRange own{info.region_start[root],
                    std::min(view.last_node[root], view.first_use[t])};
      const NodeId other = view.family_last_tensor[root] == t ? view.family_second[root]
                                                              : view.family_last[root];
      if (other != kNoId) own.lo = std::max<int64_t>(own.lo, other);
      // A pulled node moves from its slot to the first use of `t`, and its
      // inputs may then end earlier.
      NodeRange pulled;
      if (chain.pulls) pulled = {view.first_use[t], std::max(view.first_use[t], chain.last_slot)};
      if (!own.empty() && !pulled.empty() && own.lo > pulled.lo) std::swap(own, pulled);
      // Max of node peaks that cannot get lower.
      const NodeRange& a = own.empty() ? pulled : own;
      const NodeRange& b = own.empty() ? NodeRange{} : pulled;
      int64_t outside;
      int64_t peaks_inside;
      if (a.empty()) {
        outside = view.peak;
        peaks_inside = 0;
      } else if (b.empty() || b.lo > a.hi + 1) {
        outside = std::max(view.node_peak.Query(0, a.lo), view.node_peak.Query(a.hi + 1, b.empty() ? num_nodes : b.lo));
        if (!b.empty()) outside = std::max(outside, view.node_peak.Query(b.hi + 1, num_nodes));
        peaks_inside = view.peak_prefix[a.hi + 1] - view.peak_prefix[a.lo];
        if (!b.empty()) peaks_inside += view.peak_prefix[b.hi + 1] - view.peak_prefix[b.lo];
      } else {
        const int64_t hi = std::max(a.hi, b.hi);
        outside = std::max(view.node_peak.Query(0, a.lo), view.node_peak.Query(hi + 1, num_nodes));
        peaks_inside = view.peak_prefix[hi + 1] - view.peak_prefix[a.lo];
      }
      // The first non-forward reader's own step keeps its bytes: the copy
      // replaces the original there, and only pulled inputs may leave.
      if (view.first_use_floor[t] != kLowest && chain.pulled_inputs != kUnbounded) {
        outside = std::max(outside, view.first_use_floor[t] -
                                        (chain.pulls ? chain.pulled_inputs : 0));
      }
      const int64_t own_bytes = own.empty() && !chain.pulls ? 0 : bytes;
      // Floating-point slack: the real added cost is a difference of two sums.
      const double slack =
          info.exact_costs ? 0.0 : 1e-9 * (current.recompute_cost + chain.cost);
      const double cost = std::max(0.0, chain.cost - slack);
      int64_t freed0 = view.peak - outside;
      // A node's own step stays; only storages that end earlier leave it.
      if (!chain.pulls) {
        freed0 = std::min(freed0, own_bytes);
      } else if (view.peak_at_node_step && chain.pulled_inputs < kUnbounded - own_bytes) {
        freed0 = std::min(freed0, own_bytes + chain.pulled_inputs);
      }
      if (freed0 > 0) tier0.push_back({t, cost / static_cast<double>(freed0), freed0});
      // Per peak node, as for freed0; with a pull only when every peak node
      // peaks at its own step.
      int64_t freed1 = kUnbounded;
      if (!chain.pulls) {
        freed1 = SaturatingMultiply(own_bytes, peaks_inside);
      } else if (view.all_peaks_at_node_step && chain.pulled_inputs < kUnbounded - own_bytes) {
        freed1 = SaturatingMultiply(own_bytes + chain.pulled_inputs, peaks_inside);
      }
      if (peaks_inside > 0 && freed1 > 0) {
        tier1.push_back({t, cost / static_cast<double>(freed1), freed1});
      }
    }

    Choice best;
    auto search = [&](std::vector<Bound>& bounds, int tier) {
      std::sort(bounds.begin(), bounds.end(), BoundBefore);
      for (const Bound& bound : bounds) {
        if (best.tensor != kNoId && !MayBeat(bound, tier, best)) break;
        const TensorId t = bound.tensor;
        if (tried_at[t] == iteration) continue;
        result.keep[t] = 0;
        Simulate(context, result.keep, sim_options, &trial);
        result.keep[t] = 1;
        ++counters.simulations;
        Choice choice = Score(t, current, trial);
        tried_at[t] = iteration;
        if (choice.tensor != kNoId && choice.BetterThan(best)) {
          best = choice;
          std::swap(best_sim, trial);
        }
      }
    };
    search(tier0, 0);
    // When nothing lowers the peak, every tier-0 bound was simulated and
    // `best` already holds the best tier-1 drop among them.
    if (best.tensor == kNoId || best.tier != 0) {
      search(tier1, 1);
    }
    spdlog::trace("incremental: iteration {}: {} tier-0 bounds, {} tier-1 bounds, best tier {}, {} simulations so far",
                  iteration, tier0.size(), tier1.size(), best.tier, counters.simulations);
    if (best.tensor == kNoId) break;
    spdlog::debug("incremental: drop '{}' (peak {} -> {}, cost +{})",
                  graph.tensors[best.tensor].name, current.peak_bytes, best_sim.peak_bytes,
                  best_sim.recompute_cost - current.recompute_cost);
    result.keep[best.tensor] = 0;
    result.drops.push_back(best.tensor);
    std::swap(current, best_sim);
  }
  result.peak = current.peak_bytes;
  result.recompute_cost = current.recompute_cost;
  result.fits = current.peak_bytes <= options.budget_bytes;
  spdlog::info("incremental: {} drops, peak {} -> {} bytes (budget {}), {}; {} simulations",
               result.drops.size(), result.start_peak, result.peak, options.budget_bytes,
               result.fits ? "fits" : "does not fit", counters.simulations);
  return result;
}

}  // namespace ckptplan
