#include "ckptplan/plan/strategies.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "ckptplan/ir/scope.h"

namespace ckptplan {
namespace {

constexpr std::string_view kNames[] = {"ckptplan",         "greedy",        "save-all",
                                       "scope-checkpoint", "sqrt-segments", "knapsack"};

}  // namespace

std::string_view ToString(Strategy strategy) { return kNames[static_cast<size_t>(strategy)]; }

bool ParseStrategy(std::string_view name, Strategy* strategy) {
  for (Strategy s : AllStrategies()) {
    if (ToString(s) == name) {
      *strategy = s;
      return true;
    }
  }
  return false;
}

const std::vector<Strategy>& AllStrategies() {
  static const std::vector<Strategy> kAll = {Strategy::kCkptplan,     Strategy::kGreedy,
                                             Strategy::kSaveAll,      Strategy::kScopeCheckpoint,
                                             Strategy::kSqrtSegments, Strategy::kKnapsack};
  return kAll;
}

std::vector<TensorId> InternalCandidates(const Graph& graph, const std::vector<uint32_t>& group) {
  // A tensor escapes its group when a forward node of another group (or of
  // no group) reads it: it is then a checkpoint input, which stays saved.
  std::vector<uint8_t> read_outside(graph.tensors.size(), 0);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].phase != Phase::kForward) continue;
    for (TensorId t : graph.nodes[n].inputs) {
      NodeId p = graph.tensors[t].producer;
      if (p == kNoId || group[p] == kNoId) continue;
      if (group[n] != group[p]) read_outside[t] = 1;
    }
  }
  std::vector<TensorId> internal;
  for (TensorId t : SaveCandidates(graph)) {
    NodeId p = graph.tensors[t].producer;
    if (group[p] != kNoId && !read_outside[t]) internal.push_back(t);
  }
  return internal;
}

SaveSet CheckpointGroups(const Graph& graph, const std::vector<uint32_t>& group) {
  return CheckpointGroups(SimContext(graph), group);
}

SaveSet CheckpointGroups(const SimContext& context, const std::vector<uint32_t>& group) {
  const Graph& graph = context.graph;
  SaveSet keep = SaveAll(graph);
  std::vector<uint8_t> droppable(graph.tensors.size(), 0);
  for (TensorId t : context.droppable) droppable[t] = 1;
  for (TensorId t : InternalCandidates(graph, group)) {
    if (droppable[t]) keep[t] = 0;
  }
  return keep;
}

SaveSet ScopeCheckpointPlan(const Graph& graph) { return ScopeCheckpointPlan(SimContext(graph)); }

SaveSet ScopeCheckpointPlan(const SimContext& context) {
  const Graph& graph = context.graph;
  std::vector<uint32_t> group(graph.nodes.size(), kNoId);
  std::map<std::string, uint32_t> ids;  // block name -> group id
  // Nodes in a row most often share their scope: its block is looked up once.
  const std::string* last_scope = nullptr;
  uint32_t last_group = kNoId;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase != Phase::kForward || node.scope.empty()) continue;
    if (last_scope == nullptr || node.scope != *last_scope) {
      auto [it, inserted] =
          ids.emplace(ScopeBlock(node.scope), static_cast<uint32_t>(ids.size()));
      last_scope = &node.scope;
      last_group = it->second;
    }
    group[n] = last_group;
  }
  return CheckpointGroups(context, group);
}

SegmentPlans::SegmentPlans(const SimContext& context)
    : num_tensors_(context.graph.tensors.size()) {
  const Graph& graph = context.graph;
  constexpr uint32_t kNotForward = UINT32_MAX;
  std::vector<uint32_t> index(graph.nodes.size(), kNotForward);  // per node: forward index
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].phase == Phase::kForward) index[n] = static_cast<uint32_t>(forward_++);
  }
  // Per tensor: the forward indices of its forward readers, lowest and highest.
  std::vector<uint32_t> first(graph.tensors.size(), kNotForward), last(graph.tensors.size(), 0);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (index[n] == kNotForward) continue;
    for (TensorId t : graph.nodes[n].inputs) {
      first[t] = std::min(first[t], index[n]);
      last[t] = std::max(last[t], index[n]);
    }
  }
  for (TensorId t : context.droppable) {
    const NodeId p = graph.tensors[t].producer;
    if (p == kNoId || index[p] == kNotForward) continue;  // in no segment: kept
    spans_.push_back({t, std::min(first[t], index[p]), std::max(last[t], index[p])});
  }
}

SaveSet SegmentPlans::Plan(int segments) const {
  SaveSet keep(num_tensors_, 1);
  if (forward_ == 0) return keep;
  const size_t count = std::clamp<size_t>(static_cast<size_t>(std::max(segments, 1)), 1, forward_);
  // Forward node i is in segment i * count / forward (as SegmentPlan's groups).
  for (const Span& span : spans_) {
    if (span.first * count / forward_ == span.last * count / forward_) keep[span.tensor] = 0;
  }
  return keep;
}

SaveSet SegmentPlan(const Graph& graph, int segments) {
  return SegmentPlans(SimContext(graph)).Plan(segments);
}

SaveSet SqrtSegmentsPlan(const Graph& graph) { return SqrtSegmentsPlan(SimContext(graph)); }

SaveSet SqrtSegmentsPlan(const SimContext& context) {
  const SegmentPlans plans(context);
  return plans.Plan(
      static_cast<int>(std::lround(std::sqrt(static_cast<double>(plans.forward())))));
}

SaveSet KnapsackPlan(const Graph& graph, int64_t budget_bytes, int64_t reserve_bytes) {
  return KnapsackPlan(SimContext(graph), budget_bytes, reserve_bytes);
}

SaveSet KnapsackPlan(const SimContext& context, int64_t budget_bytes, int64_t reserve_bytes) {
  SimOptions options;
  options.reserve_bytes = reserve_bytes;
  return KnapsackPlan(context, budget_bytes, Simulate(context, SaveAll(context.graph), options));
}

SaveSet KnapsackPlan(const SimContext& context, int64_t budget_bytes, const SimResult& save_all) {
  const Graph& graph = context.graph;
  const std::vector<TensorId>& candidates = context.droppable;
  SaveSet keep = SaveAll(graph);
  std::vector<int64_t> weight;
  std::vector<double> value;
  int64_t total = 0;
  for (TensorId t : candidates) {
    weight.push_back(graph.tensors[graph.StorageRoot(t)].bytes);
    value.push_back(graph.NodeCost(graph.tensors[t].producer));
    total += weight.back();
  }
  const int64_t fixed = save_all.peak_bytes - total;
  const int64_t capacity = budget_bytes - fixed;
  if (capacity >= total) return keep;
  for (TensorId t : candidates) keep[t] = 0;
  if (capacity <= 0) return keep;
  // Weights rounded up, capacity down: the chosen set never exceeds it. The
  // table of choices has one bit per candidate and capacity bucket: 4096
  // buckets, fewer above 16,384 candidates so that it stays within 64 Mibit.
  constexpr int64_t kMaxBuckets = 4096, kMinBuckets = 64, kTableBits = int64_t{1} << 26;
  const size_t k = candidates.size();
  const int64_t buckets =
      std::clamp<int64_t>(kTableBits / static_cast<int64_t>(k), kMinBuckets, kMaxBuckets);
  const int64_t unit = std::max<int64_t>(1, (capacity + buckets - 1) / buckets);
  const size_t cap = static_cast<size_t>(capacity / unit);
  // best[c]: the most value within c buckets from the items so far. Three
  // shortcuts leave the choice as the plain table's:
  // - an item of no value is never taken (best is non-decreasing in c, so
  //   best[c - w] + 0 never beats best[c]): its row is skipped;
  // - once the items so far fit whole in c buckets (c >= their summed
  //   weights, `whole`), best[c] is the sum of their values and the last
  //   item is taken there: such cells are not written, but read as `all`,
  //   and an item's take bit at c >= its `whole` is 1 (while adding its
  //   value raises the sum: past a rounding loss every cell is written).
  // - the choice is read back from c = cap down, each item taken moving c
  //   down by its weight: item i's row is read at c >= cap less the weights
  //   of the items of value after it, `low`, and so reads the row before at
  //   c >= that less its own weight. Cells below `low` are not written.
  std::vector<double> best(cap + 1, 0);
  std::vector<uint64_t> take((k * (cap + 1) + 63) / 64, 0);
  std::vector<size_t> whole_after(k, cap + 1);  // per item: bits at or past it are 1
  std::vector<size_t> low(k, 0);                // per item of value: its row's lowest cell read
  {
    size_t after = 0;  // buckets of the items of value after i, up to cap
    for (size_t i = k; i-- > 0;) {
      if (!(value[i] > 0)) continue;
      low[i] = cap - after;
      after = std::min(cap, after + static_cast<size_t>((weight[i] + unit - 1) / unit));
    }
  }
  auto bit = [&](size_t i, size_t c) { return i * (cap + 1) + c; };
  size_t whole = 0;  // the items so far fit whole in `whole` buckets or more
  double all = 0;    // their values' sum
  for (size_t i = 0; i < k; ++i) {
    if (!(value[i] > 0)) continue;
    if (!(all + value[i] > all) && whole <= cap) {
      // The value is lost in the sum (rounding): the plain table does not
      // take it where all fit, so from here every cell is written.
      std::fill(best.begin() + static_cast<std::ptrdiff_t>(whole), best.end(), all);
      whole = cap + 1;
    }
    const size_t w = static_cast<size_t>((weight[i] + unit - 1) / unit);
    const size_t next_whole = std::min(cap + 1, whole + w);
    auto read = [&](size_t c) { return c < whole ? best[c] : all; };
    for (size_t c = next_whole; c-- > std::max(w, low[i]);) {
      const double without = read(c);
      const double with = read(c - w) + value[i];
      if (with > without) {
        best[c] = with;
        take[bit(i, c) / 64] |= uint64_t{1} << (bit(i, c) % 64);
      } else {
        best[c] = without;
      }
    }
    // Below w the item does not fit: cells at or past the old `whole` (w >
    // those cells only when w > old whole) keep the old sum, written out.
    for (size_t c = std::max(whole, low[i]); c < std::min(w, next_whole); ++c) best[c] = all;
    whole = next_whole;
    all += value[i];
    whole_after[i] = whole;
  }
  size_t c = cap;
  for (size_t i = k; i-- > 0;) {
    const bool taken = c >= whole_after[i] || ((take[bit(i, c) / 64] >> (bit(i, c) % 64)) & 1);
    if (!taken) continue;
    keep[candidates[i]] = 1;
    c -= static_cast<size_t>((weight[i] + unit - 1) / unit);
  }
  return keep;
}

}  // namespace ckptplan
