#include "ckptplan/sim/simulator.h"

#include "ckptplan/base/text_escape.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "ckptplan/base/range_add_max.h"
#include "ckptplan/base/size.h"

namespace ckptplan {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
// Forward prefixes kept (SimContext::Scratch): this many bytes per node of
// the graph at most, and at least kMinPrefixBytes.
constexpr size_t kPrefixBytesPerNode = 32;
constexpr size_t kMinPrefixBytes = size_t{1} << 20;

constexpr std::string_view kCategoryNames[] = {
    "parameters", "gradients", "optimizer_state", "buffers",  "inputs",
    "saved_activations", "temporaries", "recomputed", "reserve", "collectives"};

bool IsForwardProduced(const Graph& graph, TensorId t) {
  NodeId p = graph.tensors[t].producer;
  return p != kNoId && graph.nodes[p].phase == Phase::kForward;
}

// Resident storage: never allocated or freed by the simulator.
bool HasResidentRoot(const Graph& graph, TensorId t) {
  return IsResidentKind(graph.tensors[graph.StorageRoot(t)].kind);
}

// Adds `tensor`'s bytes to its resident category, where it has one (an
// alias adds nothing: its root counts).
void AddResident(const Tensor& tensor, CategoryBytes* bytes) {
  if (tensor.alias_of != kNoId) return;
  switch (tensor.kind) {
    case TensorKind::kParameter: (*bytes)[size_t(Category::kParameters)] += tensor.bytes; break;
    case TensorKind::kBuffer: (*bytes)[size_t(Category::kBuffers)] += tensor.bytes; break;
    case TensorKind::kInput: (*bytes)[size_t(Category::kInputs)] += tensor.bytes; break;
    case TensorKind::kOptimizerState:
      (*bytes)[size_t(Category::kOptimizerState)] += tensor.bytes;
      break;
    default: break;
  }
}

// Adds the resident state the graph declares besides its tensors.
void AddResidentExtras(const Graph& graph, CategoryBytes* bytes) {
  const TrainingState& training = graph.training;
  (*bytes)[size_t(Category::kParameters)] += training.extra_parameter_bytes;
  (*bytes)[size_t(Category::kBuffers)] += training.extra_buffer_bytes;
  (*bytes)[size_t(Category::kOptimizerState)] += training.extra_optimizer_bytes;
}

CategoryBytes ResidentBytes(const Graph& graph, int64_t reserve_bytes) {
  CategoryBytes bytes{};
  for (const Tensor& tensor : graph.tensors) AddResident(tensor, &bytes);
  AddResidentExtras(graph, &bytes);
  bytes[size_t(Category::kReserve)] = reserve_bytes;
  return bytes;
}

uint32_t FirstNonForwardNode(const Graph& graph) {
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].phase != Phase::kForward) return n;
  }
  return kNone;
}

// Per tensor: 1 for the candidates whose recompute would re-run a random op.
// A recompute re-runs the producer and, depth first, the producers of its
// missing inputs; inputs no plan saves (forward tensors that are not
// candidates) are always missing, so the random producer is reached through
// them; a candidate on the way is pinned itself and so saved, which stops
// the walk. Forward nodes are in topological order, so one pass settles it.
// Also the nodes whose re-run re-runs one, into *reruns_random.
std::vector<uint8_t> PinnedCandidates(const SimContext& context,
                                      const std::vector<uint8_t>& random_op,
                                      std::vector<uint8_t>* reruns_random) {
  const size_t num_nodes = context.node_forward.size();
  std::vector<uint8_t> random(context.root.size(), 0);  // re-making it re-runs one
  std::vector<uint8_t> pinned(context.root.size(), 0);
  reruns_random->assign(num_nodes, 0);
  for (NodeId n = 0; n < num_nodes; ++n) {
    if (!context.node_forward[n]) continue;
    bool reruns = random_op[n];
    const uint32_t outputs = context.outputs_begin[n];
    for (uint32_t i = context.inputs_begin[n]; i < outputs; ++i) {
      reruns = reruns || (context.NeverSaved(context.ids[i]) && random[context.ids[i]]);
    }
    if (!reruns) continue;
    (*reruns_random)[n] = 1;
    for (uint32_t i = outputs; i < context.inputs_begin[n + 1]; ++i) {
      const TensorId t = context.ids[i];
      random[t] = 1;
      pinned[t] = context.is_candidate[t];
    }
  }
  return pinned;
}

// Builds the step program and the buffers' lifetimes for one save set.
class Builder {
 public:
  // With `cost_only`, Run decides the recompute steps and sums their cost
  // (result->recompute_cost) as it would otherwise, but writes no steps or
  // storages: each storage made is only counted, for the kNone-or-not its
  // index stands for.
  Builder(const SimContext& context, const SaveSet& keep, NodeId first, NodeId end,
          bool record_details, SimResult* result, bool cost_only = false)
      : context_(context), graph_(context.graph), keep_(keep), result_(*result),
        first_(first), end_(end), record_details_(record_details), cost_only_(cost_only),
        stack_(context.scratch.stack),
        original_(context.scratch.original),
        recomputed_(context.scratch.recomputed),
        touched_(context.scratch.touched) {
    if (original_.size() != graph_.tensors.size()) {
      original_.assign(graph_.tensors.size(), kNone);
      recomputed_.assign(graph_.tensors.size(), kNone);
    }
    touched_.clear();
  }
  ~Builder() {
    for (TensorId t : touched_) original_[t] = recomputed_[t] = kNone;
  }

  void Run() {
    const TensorId* ids = context_.ids.data();
    NodeId n = ResumeAfterForwardPrefix();
    for (; n < end_; ++n) {
      if (!context_.node_forward[n]) {
        for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
          if (NeedsRecompute(ids[i])) MaterializeForTensor(ids[i]);
        }
      }
      EmitStep(n, /*recompute=*/false);
    }
  }

 private:
  bool Saved(TensorId t) const { return context_.is_candidate[t] && keep_[t]; }

  // The range's leading forward nodes run alike under every plan: their
  // steps are copied from the last run of this range, or run and kept.
  // Returns the first node still to run.
  NodeId ResumeAfterForwardPrefix() {
    using Prefix = SimContext::Scratch::ForwardPrefix;
    SimContext::Scratch& scratch = context_.scratch;
    const uint64_t key = (uint64_t{first_} << 32) | end_;
    auto found = scratch.prefixes.find(key);
    if (found != scratch.prefixes.end()) {
      const Prefix& prefix = found->second;
      if (cost_only_) {
        made_ = static_cast<uint32_t>(prefix.buffers.size());
      } else {
        result_.steps.assign(prefix.steps.begin(), prefix.steps.end());
        result_.buffers.assign(prefix.buffers.begin(), prefix.buffers.end());
      }
      touched_.assign(prefix.outputs.begin(), prefix.outputs.end());
      for (size_t i = 0; i < prefix.outputs.size(); ++i) {
        original_[prefix.outputs[i]] = prefix.output_buffers[i];
      }
      return prefix.end;
    }
    NodeId n = first_;
    for (; n < end_ && context_.node_forward[n]; ++n) EmitStep(n, /*recompute=*/false);
    if (n == first_ || cost_only_) return n;  // a cost-only run keeps no steps to share
    // Bounded like the planners' caches: dropped all at once past a size.
    const size_t most = std::max(kMinPrefixBytes, kPrefixBytesPerNode * graph_.nodes.size());
    if (scratch.prefix_bytes > most) {
      scratch.prefixes.clear();
      scratch.prefix_bytes = 0;
    }
    Prefix& prefix = scratch.prefixes[key];
    prefix.end = n;
    prefix.steps = result_.steps;
    prefix.buffers = result_.buffers;
    prefix.outputs = touched_;
    prefix.output_buffers.resize(touched_.size());
    for (size_t i = 0; i < touched_.size(); ++i) prefix.output_buffers[i] = original_[touched_[i]];
    scratch.prefix_bytes += prefix.steps.size() * sizeof(Step) +
                            prefix.buffers.size() * sizeof(Buffer) +
                            prefix.outputs.size() * (sizeof(TensorId) + sizeof(uint32_t));
    return n;
  }

  // A non-forward read of `t` that must come from a recomputed copy.
  bool NeedsRecompute(TensorId t) const {
    return context_.Unsaved(t, keep_) && recomputed_[t] == kNone;
  }

  // Buffer that a step of `phase` (recompute steps count as non-forward)
  // reads for tensor `t`; kNone for resident storage.
  uint32_t BufferFor(TensorId t, bool forward_read) const {
    if (context_.resident_root[t]) return kNone;
    if (forward_read || !context_.forward_produced[t] || Saved(t)) return original_[t];
    return recomputed_[t];
  }

  void MaterializeForTensor(TensorId target) {
    Recompute record{target, {}, 0};
    std::vector<TensorId>& stack = stack_;
    stack.assign(1, target);
    bool first = true;
    while (!stack.empty()) {
      TensorId t = stack.back();
      if (recomputed_[t] != kNone) {
        stack.pop_back();
        continue;
      }
      const NodeId p = context_.producer[t];
      TensorId missing = kNoId;
      for (uint32_t i = context_.inputs_begin[p]; i < context_.outputs_begin[p]; ++i) {
        if (NeedsRecompute(context_.ids[i])) {
          missing = context_.ids[i];
          break;
        }
      }
      if (missing != kNoId) {
        stack.push_back(missing);
        continue;
      }
      EmitStep(p, /*recompute=*/true);
      if (!cost_only_) result_.steps.back().starts_chain = first;
      first = false;
      if (record_details_) record.chain.push_back(p);
      record.cost += context_.node_cost[p];
      stack.pop_back();
    }
    result_.recompute_cost += record.cost;
    if (record_details_) result_.recomputes.push_back(std::move(record));
  }

  // Steps are emitted in order, so a read is the buffer's latest so far
  // (a plain store: no load to wait for).
  void Read(uint32_t buffer, uint32_t step) {
    if (buffer != kNone) result_.buffers[buffer].last_step = step;
  }

  // A cost-only run (cost_only_) writes no step nor storage: a storage made
  // gets the next count as its index, and the copies are recorded alike.
  void EmitStep(NodeId n, bool recompute) {
    const uint32_t step = static_cast<uint32_t>(result_.steps.size());
    const bool forward_read = context_.node_forward[n] && !recompute;
    const TensorId* ids = context_.ids.data();
    const uint32_t outputs = context_.outputs_begin[n];
    if (!cost_only_) {
      // Filled in place: a braced temporary makes the compiler store the
      // fields one by one and load them back whole, which stalls.
      Step& emitted = result_.steps.emplace_back();
      emitted.node = n;
      emitted.recompute = recompute;
      emitted.starts_chain = false;
      for (uint32_t i = context_.inputs_begin[n]; i < outputs; ++i) {
        Read(BufferFor(ids[i], forward_read), step);
      }
    }
    for (uint32_t i = outputs; i < context_.inputs_begin[n + 1]; ++i) {
      const TensorId out = ids[i];
      uint32_t buffer = kNone;
      const SimContext::Made made = context_.made[out];
      if (made == SimContext::Made::kAlias) {
        buffer = BufferFor(context_.alias_of[out], forward_read);
      } else if (made != SimContext::Made::kNothing && cost_only_) {
        buffer = made_++;
      } else if (made != SimContext::Made::kNothing) {
        buffer = static_cast<uint32_t>(result_.buffers.size());
        Category category = recompute ? Category::kRecomputed
                            : made == SimContext::Made::kGradient ? Category::kGradients
                            : context_.collective_made[out]       ? Category::kCollectives
                                                                  : Category::kTemporaries;
        Buffer& buffer_made = result_.buffers.emplace_back();
        buffer_made.root = out;
        buffer_made.category = category;
        buffer_made.first_step = buffer_made.last_step = step;
      }
      touched_.push_back(out);
      if (!recompute) {
        original_[out] = buffer;
      } else if (recomputed_[out] == kNone && !Saved(out)) {
        recomputed_[out] = buffer;
      }
    }
  }

  const SimContext& context_;
  const Graph& graph_;
  const SaveSet& keep_;
  SimResult& result_;
  const NodeId first_, end_;           // nodes simulated
  const bool record_details_;
  const bool cost_only_;
  uint32_t made_ = 0;                  // storages counted (cost-only)
  std::vector<TensorId>& stack_;       // of MaterializeForTensor
  std::vector<uint32_t>& original_;    // buffer of each tensor's first instance
  std::vector<uint32_t>& recomputed_;  // buffer of its recomputed copy
  std::vector<TensorId>& touched_;     // entries of the two set by this run
};

// Settles a storage once the steps are built (FinishTotals calls it).
struct Settle {
  const SimContext& context;
  const SimResult& result;
  NodeId end;          // the simulated range's end
  uint32_t last_step;  // the range's last step
  bool whole;          // the range is the step

  // Fixes what depends on the finished lifetimes: gradients and storages
  // read after `end` live to the last step; a forward temporary read later
  // than the forward was saved.
  void operator()(Buffer& buffer) const {
    if (buffer.category == Category::kGradients ||
        (!whole && context.last_reader[buffer.root] != kNoId &&
         context.last_reader[buffer.root] >= end)) {
      buffer.last_step = last_step;
    } else if (buffer.category == Category::kTemporaries &&
               context.forward_produced[buffer.root]) {
      buffer.category = ForwardStorageCategory(context, result.steps[buffer.last_step]);
    }
  }
};

// Step `s`'s workspace: the approximate option's per step (`step_workspace`,
// from Simulate) when given, else its node's.
int64_t StepWorkspace(const SimContext& context, const SimResult& result,
                      const std::vector<int64_t>* step_workspace, uint32_t s) {
  return step_workspace != nullptr ? (*step_workspace)[s]
                                   : context.node_workspace[result.steps[s].node];
}

// Totals, the peak and node peaks in two passes: storages through a
// difference array, each step's workspace and the implicit gradients added
// as the steps are summed.
// The storages are settled (Settle) on the way.
void FinishTotals(const SimContext& context, NodeId first, NodeId end,
                  uint32_t first_backward, int64_t resident_total,
                  const std::vector<int64_t>* step_workspace, SimResult& result) {
  const size_t num_steps = result.steps.size();
  std::vector<int64_t>& delta = context.scratch.delta;
  ReserveSteps(delta, num_steps + 1);
  delta.assign(num_steps + 1, 0);
  const Settle settle{context, result, end, num_steps == 0 ? 0 : uint32_t(num_steps - 1),
                      end == context.graph.nodes.size()};
  for (Buffer& buffer : result.buffers) {
    settle(buffer);
    const int64_t bytes = context.bytes[buffer.root];
    delta[buffer.first_step] += bytes;
    delta[buffer.last_step + 1] -= bytes;
  }
  if (first_backward != kNone) {
    delta[first_backward] += context.graph.training.implicit_gradient_bytes;
  }
  ReserveSteps(result.total, num_steps);
  result.total.resize(num_steps);
  PeakTracker peaks(&result, first, end, resident_total);
  const Step* steps = result.steps.data();
  int64_t running = resident_total;
  for (uint32_t s = 0; s < num_steps; ++s) {
    running += delta[s];
    const int64_t total =
        running + std::max<int64_t>(StepWorkspace(context, result, step_workspace, s), 0);
    result.total[s] = total;
    peaks.Add(s, steps[s], total);
  }
  peaks.Finish();
}

}  // namespace

std::string_view ToString(Category category) {
  return kCategoryNames[static_cast<size_t>(category)];
}

std::vector<TensorId> SaveCandidates(const Graph& graph) {
  std::vector<uint8_t> flagged(graph.tensors.size(), 0);
  for (const Node& node : graph.nodes) {
    if (node.phase == Phase::kForward) continue;
    for (TensorId t : node.inputs) {
      if (IsForwardProduced(graph, t) && !HasResidentRoot(graph, t)) flagged[t] = 1;
    }
  }
  std::vector<TensorId> candidates;
  for (TensorId t = 0; t < flagged.size(); ++t) {
    if (flagged[t]) candidates.push_back(t);
  }
  return candidates;
}

std::vector<TensorId> DroppableCandidates(const Graph& graph) {
  return SimContext(graph).droppable;
}

SaveSet SaveAll(const Graph& graph) { return SaveSet(graph.tensors.size(), 1); }

const CategoryBytes& CategoriesAt(const SimResult& sim, uint32_t step) {
  if (step < sim.by_category.size()) return sim.by_category[step];
  assert(step == sim.peak_step);
  return sim.peak_breakdown;
}

SimContext::SimContext(const Graph& g) : graph(g) {
  // Nodes and tensors are large structs: each is read in one pass, which
  // copies what the rest reads into the flat arrays below.
  const size_t num_nodes = graph.nodes.size();
  const size_t num_tensors = graph.tensors.size();
  inputs_begin.resize(num_nodes + 1);
  outputs_begin.resize(num_nodes);
  node_forward.resize(num_nodes);
  node_workspace.resize(num_nodes);
  node_cost.resize(num_nodes);
  std::vector<uint8_t> node_collective(num_nodes), random_op(num_nodes);
  ids.reserve(2 * num_tensors + num_nodes);  // grown as needed, trimmed below
  first_non_forward = kNoId;
  for (NodeId n = 0; n < num_nodes; ++n) {
    const Node& node = graph.nodes[n];
    inputs_begin[n] = static_cast<uint32_t>(ids.size());
    ids.insert(ids.end(), node.inputs.begin(), node.inputs.end());
    outputs_begin[n] = static_cast<uint32_t>(ids.size());
    ids.insert(ids.end(), node.outputs.begin(), node.outputs.end());
    node_forward[n] = node.phase == Phase::kForward;
    node_workspace[n] = node.workspace_bytes;
    node_cost[n] = graph.NodeCost(n);
    step_cost += node_cost[n];
    node_collective[n] = IsCollectiveOp(node.op);
    // Only forward nodes are re-run (PinnedCandidates).
    random_op[n] = node_forward[n] && IsRandomOp(node.op);
    if (!node_forward[n] && first_non_forward == kNoId) first_non_forward = n;
  }
  inputs_begin[num_nodes] = static_cast<uint32_t>(ids.size());
  if (ids.capacity() > ids.size() + ids.size() / 4) ids.shrink_to_fit();
  exact_costs = step_cost <= 9007199254740992.0;
  for (double cost : node_cost) exact_costs = exact_costs && cost == std::floor(cost);

  root.resize(num_tensors);
  forward_produced.resize(num_tensors);
  made.resize(num_tensors);
  collective_made.resize(num_tensors);
  producer.resize(num_tensors);
  alias_of.resize(num_tensors);
  bytes.resize(num_tensors);
  std::vector<uint8_t> resident_kind(num_tensors);
  for (TensorId t = 0; t < num_tensors; ++t) {
    const Tensor& tensor = graph.tensors[t];
    // Aliases usually point at earlier tensors; otherwise walk the chain.
    const TensorId alias = tensor.alias_of;
    root[t] = alias == kNoId ? t : alias < t ? root[alias] : graph.StorageRoot(t);
    const NodeId p = tensor.producer;
    forward_produced[t] = p != kNoId && node_forward[p];
    resident_kind[t] = IsResidentKind(tensor.kind);
    made[t] = alias != kNoId                          ? Made::kAlias
              : resident_kind[t]                      ? Made::kNothing
              : tensor.kind == TensorKind::kGradient ? Made::kGradient
                                                     : Made::kActivation;
    producer[t] = p;
    collective_made[t] = p != kNoId && node_collective[p];
    alias_of[t] = alias;
    bytes[t] = tensor.bytes;
    AddResident(tensor, &resident);
  }
  AddResidentExtras(graph, &resident);
  resident_root.resize(num_tensors);
  for (TensorId t = 0; t < num_tensors; ++t) resident_root[t] = resident_kind[root[t]];

  is_candidate.assign(num_tensors, 0);
  last_reader.assign(num_tensors, kNoId);
  for (NodeId n = 0; n < num_nodes; ++n) {
    const uint32_t outputs = outputs_begin[n];
    for (uint32_t i = inputs_begin[n]; i < outputs; ++i) {
      const TensorId t = ids[i];
      last_reader[root[t]] = n;
      if (!node_forward[n] && forward_produced[t] && !resident_root[t]) is_candidate[t] = 1;
    }
  }
  pinned = PinnedCandidates(*this, random_op, &reruns_random);
  for (TensorId t = 0; t < num_tensors; ++t) {
    if (is_candidate[t]) candidates.push_back(t);
    if (is_candidate[t] && !pinned[t]) droppable.push_back(t);
  }
}

double RecomputeCost(const SimContext& context, const SaveSet& keep, const SimOptions& options) {
  const NodeId end = std::min<size_t>(options.end_node, context.graph.nodes.size());
  const NodeId first = std::min(options.first_node, end);
  SimResult result;  // only its recompute cost is written
  Builder builder(context, keep, first, end, /*record_details=*/false, &result,
                  /*cost_only=*/true);
  builder.Run();
  return result.recompute_cost;
}

SimResult Simulate(const Graph& graph, const SaveSet& keep, const SimOptions& options) {
  return Simulate(SimContext(graph), keep, options);
}

SimResult Simulate(const SimContext& context, const SaveSet& keep, const SimOptions& options) {
  SimResult result;
  Simulate(context, keep, options, &result);
  return result;
}

void Simulate(const SimContext& context, const SaveSet& keep, const SimOptions& options,
              SimResult* out) {
  const Graph& graph = context.graph;
  assert(keep.size() == graph.tensors.size());
  const NodeId end = std::min<size_t>(options.end_node, graph.nodes.size());
  const NodeId first = std::min(options.first_node, end);
  const bool whole = first == 0 && end == graph.nodes.size();
  SimResult& result = *out;
  // Keep the vectors' memory, reset everything else.
  result.peak_bytes = 0;
  result.peak_step = 0;
  result.steps.clear();
  result.total.clear();
  result.node_peak.clear();
  result.by_category.clear();
  result.buffers.clear();
  result.recomputes.clear();
  result.recompute_cost = 0;
  result.step_cost = 0;
  result.resident = {};
  result.peak_breakdown = {};
  ReserveSteps(result.steps, end - first);
  if (whole) result.buffers.reserve(graph.tensors.size());
  Builder builder(context, keep, first, end, options.record_details, &result);
  builder.Run();
  result.step_cost = context.step_cost;

  const size_t num_steps = result.steps.size();
  if (whole) {
    result.resident = context.resident;
    result.resident[static_cast<size_t>(Category::kReserve)] = options.reserve_bytes;
  }
  // Approximate recompute: each re-run step of an approximated node has its
  // option's workspace (when given); the factors are resident.
  const std::vector<uint32_t>* approx = options.approx_options;
  if (approx != nullptr && approx->size() != graph.nodes.size()) approx = nullptr;
  std::vector<int64_t> approx_workspace;
  if (approx != nullptr) {
    approx_workspace.resize(num_steps);
    for (uint32_t s = 0; s < num_steps; ++s) {
      const NodeId n = result.steps[s].node;
      approx_workspace[s] = context.node_workspace[n];
      const uint32_t o = (*approx)[n];
      if (!result.steps[s].recompute || o == kNoId || o >= graph.nodes[n].approx.size()) continue;
      const int64_t bytes = graph.nodes[n].approx[o].workspace_bytes;
      if (bytes >= 0) approx_workspace[s] = bytes;
    }
    if (whole) {
      for (NodeId n = 0; n < graph.nodes.size(); ++n) {
        const uint32_t o = (*approx)[n];
        if (o == kNoId || o >= graph.nodes[n].approx.size()) continue;
        result.resident[static_cast<size_t>(Category::kBuffers)] +=
            graph.nodes[n].approx[o].factor_bytes;
      }
    }
  }
  const std::vector<int64_t>* step_workspace = approx != nullptr ? &approx_workspace : nullptr;
  int64_t resident_total = 0;
  for (int64_t bytes : result.resident) resident_total += bytes;

  uint32_t first_backward = kNone;
  const bool implicit_here = context.first_non_forward != kNoId &&
                             context.first_non_forward >= first && context.first_non_forward < end;
  for (uint32_t s = 0; s < num_steps && graph.training.implicit_gradient_bytes > 0 && implicit_here;
       ++s) {
    if (!result.steps[s].recompute && result.steps[s].node == context.first_non_forward) {
      first_backward = s;
      break;
    }
  }
  // Everything that is not resident, as (first step, last step, category,
  // bytes): storages, each step's workspace, the implicit gradients.
  auto for_each_part = [&](auto&& visit) {
    for (const Buffer& buffer : result.buffers) {
      visit(buffer.first_step, buffer.last_step, buffer.category, context.bytes[buffer.root]);
    }
    for (uint32_t s = 0; s < num_steps; ++s) {
      const int64_t workspace = StepWorkspace(context, result, step_workspace, s);
      if (workspace > 0) visit(s, s, Category::kTemporaries, workspace);
    }
    if (first_backward != kNone) {
      visit(first_backward, static_cast<uint32_t>(num_steps - 1), Category::kGradients,
            graph.training.implicit_gradient_bytes);
    }
  };

  FinishTotals(context, first, end, first_backward, resident_total, step_workspace, result);
  if (options.record_categories) {
    // The same parts by category: a difference array per category.
    std::vector<int64_t>& delta = context.scratch.delta;
    delta.assign((num_steps + 1) * kNumCategories, 0);
    for_each_part([&](uint32_t first_step, uint32_t last_step, Category category, int64_t bytes) {
      const size_t column = static_cast<size_t>(category);
      delta[first_step * kNumCategories + column] += bytes;
      delta[(last_step + 1) * kNumCategories + column] -= bytes;
    });
    result.by_category.resize(num_steps);
    CategoryBytes running{};
    for (uint32_t s = 0; s < num_steps; ++s) {
      CategoryBytes& row = result.by_category[s];
      for (size_t c = 0; c < kNumCategories; ++c) {
        running[c] += delta[s * kNumCategories + c];
        row[c] = result.resident[c] + running[c];
      }
    }
  }
  if (options.record_categories && num_steps > 0) {
    result.peak_breakdown = result.by_category[result.peak_step];
  } else if (options.record_details) {
    result.peak_breakdown = result.resident;
    for_each_part([&](uint32_t first_step, uint32_t last_step, Category category, int64_t bytes) {
      if (first_step <= result.peak_step && result.peak_step <= last_step) {
        result.peak_breakdown[static_cast<size_t>(category)] += bytes;
      }
    });
  }
}

LowerBound ComputeLowerBound(const Graph& graph, int64_t reserve_bytes) {
  LowerBound bound;
  bound.resident = ResidentBytes(graph, reserve_bytes);
  int64_t resident_total = 0;
  for (int64_t bytes : bound.resident) resident_total += bytes;
  bound.bytes = resident_total;

  const uint32_t first_backward = FirstNonForwardNode(graph);
  int64_t gradients = 0;  // gradient storages made at or before the node
  std::vector<uint32_t> seen(graph.tensors.size(), kNone);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    int64_t step_bytes = node.workspace_bytes;
    auto count = [&](TensorId t) {
      TensorId root = graph.StorageRoot(t);
      const Tensor& tensor = graph.tensors[root];
      if (seen[root] == n || IsResidentKind(tensor.kind)) return;
      seen[root] = n;
      if (tensor.kind == TensorKind::kGradient) {
        if (graph.tensors[t].producer == n && t == root) gradients += tensor.bytes;
        return;
      }
      step_bytes += tensor.bytes;
    };
    for (TensorId t : node.outputs) count(t);
    for (TensorId t : node.inputs) count(t);
    int64_t live_gradients = gradients;
    if (first_backward != kNone && n >= first_backward) {
      live_gradients += graph.training.implicit_gradient_bytes;
    }
    int64_t need = resident_total + live_gradients + step_bytes;
    if (bound.node == kNoId || need > bound.bytes) {
      bound.bytes = need;
      bound.node = n;
      bound.gradients = live_gradients;
      bound.step_bytes = step_bytes;
    }
  }
  return bound;
}

std::string DescribeLowerBound(const Graph& graph, const LowerBound& bound) {
  std::string text;
  for (size_t c = 0; c < kNumCategories; ++c) {
    if (bound.resident[c] == 0) continue;
    text += std::string(ToString(static_cast<Category>(c))) + " " +
            FormatBytes(bound.resident[c]) + " + ";
  }
  if (bound.gradients > 0) text += "gradients " + FormatBytes(bound.gradients) + " + ";
  text += "largest single step " + FormatBytes(bound.step_bytes);
  if (bound.node != kNoId) text += " (node '" + ShowName(graph.nodes[bound.node].name) + "')";
  return text;
}

}  // namespace ckptplan

namespace ckptplan {

std::vector<Region> FindRegions(const SimContext& context) {
  const Graph& graph = context.graph;
  const size_t num_nodes = graph.nodes.size();
  if (num_nodes == 0) return {};
  // Spans of the storages a plan can touch: made or read by a forward node.
  // A cut between nodes c - 1 and c is possible when no such span crosses it.
  const size_t num_tensors = graph.tensors.size();
  std::vector<NodeId> span_first(num_tensors, kNoId), span_last(num_tensors, 0);
  std::vector<uint8_t> pinned(num_tensors, 0);
  std::vector<uint8_t> makes_candidate(num_nodes, 0);
  for (NodeId n = 0; n < num_nodes; ++n) {
    const bool forward = context.node_forward[n];
    auto touch = [&](TensorId t) {
      if (context.resident_root[t]) return;
      const TensorId root = context.root[t];
      span_first[root] = std::min(span_first[root], n);
      span_last[root] = std::max(span_last[root], n);
      if (forward || context.forward_produced[t]) pinned[root] = 1;
    };
    const uint32_t outputs = context.outputs_begin[n];
    for (uint32_t i = context.inputs_begin[n]; i < outputs; ++i) touch(context.ids[i]);
    for (uint32_t i = outputs; i < context.inputs_begin[n + 1]; ++i) {
      const TensorId t = context.ids[i];
      touch(t);
      makes_candidate[n] |= context.is_candidate[t];
    }
  }
  std::vector<int32_t> crossing(num_nodes + 1, 0);
  for (TensorId t = 0; t < num_tensors; ++t) {
    if (!pinned[t] || span_first[t] >= span_last[t]) continue;
    ++crossing[span_first[t] + 1];
    --crossing[span_last[t] + 1];
  }
  std::vector<Region> regions;
  Region current{0, 0};
  bool has_candidate = false;
  int32_t open = 0;
  for (NodeId c = 1; c <= num_nodes; ++c) {
    has_candidate |= makes_candidate[c - 1] != 0;
    if (c == num_nodes) break;
    open += crossing[c];
    if (open == 0 && has_candidate) {
      current.end = c;
      regions.push_back(current);
      current = {c, c};
      has_candidate = false;
    }
  }
  current.end = static_cast<NodeId>(num_nodes);
  if (has_candidate || regions.empty()) {
    regions.push_back(current);
  } else {
    regions.back().end = current.end;
  }
  return regions;
}

namespace {

// Compares regions node by node, tensors up to a shift of the ids of those
// the region makes.
class ShapeComparer {
 public:
  explicit ShapeComparer(const SimContext& context) : context_(context), graph_(context.graph) {}

  // First tensor the region makes: tensor ids of copies differ by as much.
  TensorId Base(const Region& region) const {
    for (NodeId n = region.first; n < region.end; ++n) {
      if (context_.outputs_begin[n] < context_.inputs_begin[n + 1]) {
        return context_.ids[context_.outputs_begin[n]];
      }
    }
    return 0;
  }

  // Hash of what Same compares, so that only regions of equal hash are compared.
  uint64_t Hash(const Region& region) const {
    const TensorId base = Base(region);
    uint64_t hash = 1469598103934665603ull;
    auto mix = [&](uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
    mix(region.end - region.first);
    for (NodeId n = region.first; n < region.end; ++n) {
      const Node& node = graph_.nodes[n];
      mix(static_cast<uint64_t>(node.phase));
      mix(std::hash<std::string>()(node.op));
      mix(static_cast<uint64_t>(node.workspace_bytes));
      uint64_t cost_bits;
      std::memcpy(&cost_bits, &context_.node_cost[n], sizeof cost_bits);
      mix(cost_bits);
      // Inputs, then outputs (ids side by side, SimContext).
      const uint32_t bounds[3] = {context_.inputs_begin[n], context_.outputs_begin[n],
                                  context_.inputs_begin[n + 1]};
      for (int list = 0; list < 2; ++list) {
        mix(bounds[list + 1] - bounds[list]);
        for (uint32_t i = bounds[list]; i < bounds[list + 1]; ++i) {
          const TensorId t = context_.ids[i];
          mix(Local(t, region) ? uint64_t{t} - base : ~uint64_t{0});
          mix(static_cast<uint64_t>(context_.bytes[context_.root[t]]));
        }
      }
    }
    return hash;
  }

  // Whether `b` is a copy of `a`, its tensors shifted by `shift`.
  bool Same(const Region& a, const Region& b, int64_t shift) const {
    if (a.end - a.first != b.end - b.first) return false;
    const std::vector<uint32_t>& inputs = context_.inputs_begin;
    const std::vector<uint32_t>& outputs = context_.outputs_begin;
    const std::vector<TensorId>& ids = context_.ids;
    for (NodeId i = 0; i < a.end - a.first; ++i) {
      const NodeId na = a.first + i, nb = b.first + i;
      const Node& x = graph_.nodes[na];
      const Node& y = graph_.nodes[nb];
      if (x.phase != y.phase || x.op != y.op || x.workspace_bytes != y.workspace_bytes ||
          context_.node_cost[na] != context_.node_cost[nb] ||
          outputs[na] - inputs[na] != outputs[nb] - inputs[nb] ||
          inputs[na + 1] - outputs[na] != inputs[nb + 1] - outputs[nb]) {
        return false;
      }
      // Inputs and outputs, in order.
      for (uint32_t k = 0; k < inputs[na + 1] - inputs[na]; ++k) {
        if (!SameTensor(ids[inputs[na] + k], ids[inputs[nb] + k], a, b, shift)) return false;
      }
    }
    return true;
  }

 private:
  bool Local(TensorId t, const Region& region) const {
    const NodeId p = context_.producer[t];
    return p != kNoId && p >= region.first && p < region.end;
  }

  // Alike in what the simulator reads of a tensor another region made: only
  // whether it is resident, forward-made or a candidate.
  bool SameFlags(TensorId s, TensorId t) const {
    return context_.resident_root[s] == context_.resident_root[t] &&
           context_.forward_produced[s] == context_.forward_produced[t] &&
           context_.is_candidate[s] == context_.is_candidate[t];
  }

  // `s` in `a` and `t` in `b` play the same part.
  bool SameRef(TensorId s, TensorId t, const Region& a, const Region& b, int64_t shift) const {
    const bool local = Local(s, a);
    if (local != Local(t, b)) return false;
    if (!local) return SameFlags(s, t);
    return int64_t{t} - int64_t{s} == shift;
  }

  bool SameTensor(TensorId s, TensorId t, const Region& a, const Region& b, int64_t shift) const {
    if (!SameRef(s, t, a, b, shift) || !SameFlags(s, t)) return false;
    if (!Local(s, a)) return true;
    if (context_.bytes[s] != context_.bytes[t] ||
        graph_.tensors[s].kind != graph_.tensors[t].kind) {
      return false;
    }
    const TensorId xa = context_.alias_of[s], ya = context_.alias_of[t];
    if ((xa == kNoId) != (ya == kNoId)) return false;
    if (xa != kNoId && !SameRef(xa, ya, a, b, shift)) return false;
    const TensorId rs = context_.root[s], rt = context_.root[t];
    if (!SameRef(rs, rt, a, b, shift) || !SameFlags(rs, rt)) return false;
    if (context_.bytes[rs] != context_.bytes[rt]) return false;
    // Storages read after the region live to its end.
    const NodeId ls = context_.last_reader[rs], lt = context_.last_reader[rt];
    return (ls != kNoId && ls >= a.end) == (lt != kNoId && lt >= b.end);
  }

  const SimContext& context_;
  const Graph& graph_;
};

}  // namespace

std::vector<RegionShape> ShapeRegions(const SimContext& context,
                                      const std::vector<Region>& regions) {
  std::vector<RegionShape> shapes(regions.size());
  const ShapeComparer comparer(context);
  // Shapes' first regions by hash.
  std::unordered_map<uint64_t, std::vector<size_t>> firsts;
  const NodeId implicit = context.graph.training.implicit_gradient_bytes > 0
                              ? context.first_non_forward
                              : kNoId;
  for (size_t r = 0; r < regions.size(); ++r) {
    RegionShape& shape = shapes[r];
    shape.first_of_shape = r;
    const Region& region = regions[r];
    if (implicit != kNoId && implicit >= region.first && implicit < region.end) continue;
    const TensorId base = comparer.Base(region);
    std::vector<size_t>& same_hash = firsts[comparer.Hash(region)];
    for (size_t f : same_hash) {
      const int64_t shift = int64_t{base} - int64_t{comparer.Base(regions[f])};
      if (!comparer.Same(regions[f], region, shift)) continue;
      shape.first_of_shape = f;
      shape.node_shift = int64_t{region.first} - int64_t{regions[f].first};
      shape.tensor_shift = shift;
      break;
    }
    if (shape.first_of_shape == r) same_hash.push_back(r);
  }
  std::vector<size_t> copies(regions.size(), 0);
  for (const RegionShape& shape : shapes) ++copies[shape.first_of_shape];
  for (RegionShape& shape : shapes) shape.copies = copies[shape.first_of_shape];
  return shapes;
}

const std::vector<Region>& SimContext::regions() const {
  if (!regions_) {
    auto regions = std::make_shared<const std::vector<Region>>(FindRegions(*this));
    auto region_of_node = std::make_shared<std::vector<uint32_t>>(graph.nodes.size(), 0);
    for (size_t r = 0; r < regions->size(); ++r) {
      for (NodeId n = (*regions)[r].first; n < (*regions)[r].end; ++n) {
        (*region_of_node)[n] = static_cast<uint32_t>(r);
      }
    }
    regions_ = std::move(regions);
    region_of_node_ = std::move(region_of_node);
  }
  return *regions_;
}

const std::vector<uint32_t>& SimContext::region_of_node() const {
  if (!region_of_node_) regions();
  return *region_of_node_;
}

const std::vector<RegionShape>& SimContext::shapes() const {
  if (!shapes_) {
    shapes_ = std::make_shared<const std::vector<RegionShape>>(ShapeRegions(*this, regions()));
  }
  return *shapes_;
}

uint32_t PeakTracker::KeepRun(uint32_t s, uint32_t length, const Step* steps, int64_t* totals,
                              const RangeAddMax* group_max, bool* read) {
  *read = false;
  // (The ends' totals are written over with themselves.)
  const uint32_t head = AddHead(s, length, steps, totals, 0, totals);
  uint32_t i = head;
  const uint32_t end = OwnEnd(i, length, steps);
  if (end > i) {
    const auto [lo, hi] = InnerGroups(i, end, steps);
    int64_t most = std::numeric_limits<int64_t>::min();
    if (group_max != nullptr) {
      most = group_max->Query(lo, hi);
    } else {
      for (size_t n = lo; n < hi; ++n) most = std::max(most, node_peak_[n]);
    }
    // A step reaching the peak or the highest own step so far does not
    // replace it (the first one reaching it stays): read the steps only
    // where one may go above.
    if (most > peak_ || most > max_own_) {
      *read = true;
      for (uint32_t j = i; j < end; ++j) {
        const int64_t total = totals[j];
        if (total > peak_) {
          peak_ = total;
          peak_step_ = s + j;
        }
        if (!steps[j].recompute && total > max_own_) {
          max_own_ = total;
          max_own_node_ = steps[j].node;
        }
      }
    }
    pending_ = std::numeric_limits<int64_t>::min();
    i = end;
  }
  AddTail(s, i, length, steps, totals, 0, totals);
  return head;
}

}  // namespace ckptplan
