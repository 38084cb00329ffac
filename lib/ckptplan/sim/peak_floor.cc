#include "ckptplan/sim/peak_floor.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "ckptplan/sim/step_facts.h"

namespace ckptplan {
namespace {

// Calls visit(t, n) for each dropped candidate t of `keep` and each node n
// its chain must re-run whatever else a plan saves: t's producer, and the
// producers reached from it through inputs no plan saves
// (SimContext::NeverSaved). Each pair once.
template <typename Visit>
void ForEachForcedRerun(const SimContext& context, const SaveSet& keep, Visit visit) {
  std::vector<TensorId> seen_by(context.graph.nodes.size(), kNoId);
  std::vector<NodeId> stack;
  for (TensorId t : context.candidates) {
    if (keep[t]) continue;
    stack.assign(1, context.producer[t]);
    seen_by[context.producer[t]] = t;
    while (!stack.empty()) {
      const NodeId n = stack.back();
      stack.pop_back();
      visit(t, n);
      for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
        const TensorId in = context.ids[i];
        if (!context.NeverSaved(in)) continue;
        const NodeId p = context.producer[in];
        if (seen_by[p] == t) continue;
        seen_by[p] = t;
        stack.push_back(p);
      }
    }
  }
}

// Calls visit(n) once for each node the chains of `seeds`' dropped
// candidates re-run under `keep`: their producers and the producers reached
// through inputs the plan does not save (SimContext::Unsaved). With every
// candidate as a seed, these are the nodes Simulate re-runs (each once).
template <typename Visit>
void ForEachChainNode(const SimContext& context, const SaveSet& keep,
                      const std::vector<TensorId>& seeds, Visit visit) {
  std::vector<uint8_t> reached(context.graph.nodes.size(), 0);
  std::vector<NodeId> stack;
  auto reach = [&](TensorId t) {
    const NodeId p = context.producer[t];
    if (reached[p]) return;
    reached[p] = 1;
    stack.push_back(p);
  };
  for (TensorId t : seeds) {
    if (!keep[t]) reach(t);
  }
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    visit(n);
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      if (context.Unsaved(context.ids[i], keep)) reach(context.ids[i]);
    }
  }
}

}  // namespace

double RecomputeCostFloor(const SimContext& context, const SaveSet& keep) {
  double cost = 0;
  ForEachChainNode(context, keep, context.candidates,
                   [&](NodeId n) { cost += context.node_cost[n]; });
  return cost;
}

std::vector<uint8_t> ReachedByChains(const SimContext& context, const SaveSet& keep) {
  std::vector<uint8_t> reached(context.graph.nodes.size(), 0);
  ForEachChainNode(context, keep, context.candidates, [&](NodeId n) { reached[n] = 1; });
  return reached;
}

PeakFloor::PeakFloor(const SimContext& context, const SimResult& save_all) : context_(context) {
  if (save_all.steps.empty()) {
    total_ = std::numeric_limits<int64_t>::min();
    return;
  }
  const uint32_t step = save_all.peak_step;
  total_ = save_all.total[step];
  const NodeId node = save_all.steps[step].node;
  const size_t num_tensors = context.graph.tensors.size();
  // Per tensor, whether non-forward nodes read it at or before `node`, at or
  // after it: a byte a tensor, as the per-tensor arrays' first touches of
  // fresh pages are most of the floor's cost on large graphs.
  constexpr uint8_t kAtOrBefore = 1, kAtOrAfter = 2;
  std::vector<uint8_t> reads(num_tensors, 0);
  for (NodeId n = 0; n < context.graph.nodes.size(); ++n) {
    if (context.node_forward[n]) continue;
    const uint8_t when = (n <= node ? kAtOrBefore : 0) | (n >= node ? kAtOrAfter : 0);
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      reads[context.ids[i]] |= when;
    }
  }
  // The candidates read at or after `node`, by root; the roots whose copy
  // is live there when dropped.
  std::vector<std::pair<TensorId, TensorId>>& read_after = read_after_;  // (root, candidate)
  late_root_.assign(num_tensors, 0);
  for (TensorId t : context.candidates) {
    if (reads[t] & kAtOrAfter) {
      read_after.emplace_back(context.root[t], t);
      const TensorId root = context.root[t];
      if (context.made[root] == SimContext::Made::kActivation) late_root_[root] = 1;
    }
    if (reads[t] & kAtOrBefore) read_early_.push_back(t);
    if (context.made[t] == SimContext::Made::kActivation && context.root[t] == t &&
        reads[t] == (kAtOrBefore | kAtOrAfter)) {
      copies_.emplace_back(t, context.bytes[t]);
    }
  }
  for (const auto& [t, bytes] : copies_) late_root_[t] = 0;  // counted there
  std::sort(read_after.begin(), read_after.end());
  const std::vector<NodeId> last_forward = LastForwardReads(context);
  for (const Buffer& buffer : save_all.buffers) {
    if (buffer.first_step > step || buffer.last_step < step) continue;
    const TensorId root = context.root[buffer.root];
    if (!context.forward_produced[root] || last_forward[root] >= node) continue;
    const uint32_t first = static_cast<uint32_t>(readers_.size());
    for (auto it = std::lower_bound(read_after.begin(), read_after.end(),
                                    std::make_pair(root, TensorId{0}));
         it != read_after.end() && it->first == root; ++it) {
      readers_.push_back(it->second);
    }
    roots_.push_back({context.bytes[root], first, static_cast<uint32_t>(readers_.size())});
  }
}

int64_t PeakFloor::Of(const SaveSet& keep, int64_t* copies) const {
  int64_t floor = total_;
  for (const Root& root : roots_) {
    bool kept = false;
    for (uint32_t i = root.first; i < root.end && !kept; ++i) kept = keep[readers_[i]] != 0;
    if (!kept) floor -= root.bytes;
  }
  int64_t copied = 0;
  for (const auto& [t, bytes] : copies_) {
    if (!keep[t]) copied += bytes;
  }
  // The nodes re-run at or before the peak step's node: the chains of the
  // dropped candidates read by then. Their unsaved outputs read after it
  // through their copies keep those copies there.
  const SimContext& context = context_;
  ForEachChainNode(context, keep, read_early_, [&](NodeId n) {
    for (uint32_t i = context.outputs_begin[n]; i < context.inputs_begin[n + 1]; ++i) {
      const TensorId out = context.ids[i];
      if (!late_root_[out] || (context.is_candidate[out] && keep[out])) continue;
      for (auto it = std::lower_bound(read_after_.begin(), read_after_.end(),
                                      std::make_pair(out, TensorId{0}));
           it != read_after_.end() && it->first == out; ++it) {
        // A dropped view reads the copy unless a view between is saved (it
        // then reads that view's original).
        bool through_copy = !keep[it->second];
        for (TensorId a = it->second; through_copy && a != out;) {
          a = context.alias_of[a];
          through_copy = a == out || !(context.is_candidate[a] && keep[a]);
        }
        if (!through_copy) continue;
        copied += context.bytes[out];  // read after the node through its copy
        break;
      }
    }
  });
  if (copies != nullptr) *copies = copied;
  return floor + copied;
}

double PeakFloor::CostOfFitting(const SaveSet& keep, int64_t budget) const {
  const SimContext& context = context_;
  // The most the floor may fall: every copy it counts gone.
  int64_t copies = 0;
  const int64_t floor = Of(keep, &copies);
  double capacity = static_cast<double>(budget) - static_cast<double>(floor - copies);
  if (capacity < 0) return std::numeric_limits<double>::infinity();
  // The nodes each dropped candidate's chain re-runs whatever else is
  // saved (ForEachForcedRerun): a node stays re-run until every candidate
  // naming it is saved.
  std::vector<uint32_t> naming(context.graph.nodes.size(), 0);
  std::vector<std::pair<TensorId, NodeId>> forced;
  std::vector<TensorId> dropped;
  ForEachForcedRerun(context, keep, [&](TensorId t, NodeId n) {
    if (dropped.empty() || dropped.back() != t) dropped.push_back(t);
    forced.emplace_back(t, n);
    ++naming[n];
  });
  // Each candidate's share of the nodes it names: saving it with the
  // others naming a node takes the node away.
  std::vector<double> value(context.graph.tensors.size(), 0);
  for (const auto& [t, n] : forced) {
    value[t] += context.node_cost[n] / static_cast<double>(naming[n]);
  }
  // Each root not kept: its bytes shared among its candidates read at or
  // after the peak step's node (all dropped; saving one keeps the root).
  std::vector<double> weight(context.graph.tensors.size(), 0);
  for (const Root& root : roots_) {
    bool kept = false;
    for (uint32_t i = root.first; i < root.end && !kept; ++i) kept = keep[readers_[i]] != 0;
    if (kept || root.first == root.end) continue;
    const double share =
        static_cast<double>(root.bytes) / static_cast<double>(root.end - root.first);
    for (uint32_t i = root.first; i < root.end; ++i) weight[readers_[i]] += share;
  }
  // The fractional knapsack: the candidates of most value per byte are
  // saved first (no weight: all of them), ties by id.
  std::vector<std::pair<double, TensorId>> order;  // (value per byte, candidate)
  order.reserve(dropped.size());
  for (TensorId t : dropped) {
    order.emplace_back(weight[t] > 0 ? value[t] / weight[t]
                                     : std::numeric_limits<double>::infinity(),
                       t);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  // The shares of the candidates left dropped, summed (no difference of
  // sums, so that a floor is 0 only where every share may be saved).
  double cost = 0;
  for (const auto& [ratio, t] : order) {
    const double w = weight[t];
    if (w <= capacity) {
      capacity -= w;  // saved whole
    } else {
      cost += value[t] * (1.0 - capacity / w);  // saved in part, or (capacity 0) not
      capacity = 0;
    }
  }
  return cost;
}

}  // namespace ckptplan
