#include "ckptplan/dist/layout.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/dist/pipeline.h"
#include "ckptplan/dist/tensor_parallel.h"
#include "ckptplan/ir/scope.h"

namespace ckptplan {
namespace {

void Require(bool ok, const std::string& message) {
  if (!ok) throw InputError(message, kExitUsage);
}

int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? a : (a + b - 1) / b; }

// ceil(bytes * part / whole), in 128 bits so no product overflows.
int64_t Proportion(int64_t bytes, int64_t part, int64_t whole) {
  if (whole <= 0 || bytes <= 0) return 0;
  const __int128 product = static_cast<__int128>(bytes) * part;
  return static_cast<int64_t>((product + whole - 1) / whole);
}

bool IsRootOf(const Graph& graph, TensorId t, TensorKind kind) {
  return graph.tensors[t].alias_of == kNoId && graph.tensors[t].kind == kind;
}

// A run of consecutive nodes of one phase and unit, and the parameters its
// nodes read (storage roots, each once, in first-read order).
struct Segment {
  NodeId first = 0, end = 0;
  std::vector<TensorId> params;
  int64_t full_bytes = 0;  // the unit's parameters unsharded
};

std::vector<Segment> FindSegments(const Graph& graph, const std::vector<int64_t>& full_bytes) {
  std::vector<Segment> segments;
  std::string unit;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const std::string node_unit = ModuleUnit(node.scope);
    const bool same = !segments.empty() && segments.back().end == n && node_unit == unit &&
                      graph.nodes[segments.back().first].phase == node.phase;
    if (node.phase == Phase::kOptimizer) continue;
    if (!same) {
      segments.push_back({n, n, {}, 0});
      unit = node_unit;
    }
    Segment& segment = segments.back();
    segment.end = n + 1;
    for (TensorId input : node.inputs) {
      const TensorId root = graph.StorageRoot(input);
      if (!IsRootOf(graph, root, TensorKind::kParameter)) continue;
      if (std::find(segment.params.begin(), segment.params.end(), root) != segment.params.end()) {
        continue;
      }
      segment.params.push_back(root);
      segment.full_bytes += full_bytes[root];
    }
  }
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [](const Segment& s) { return s.full_bytes == 0; }),
                 segments.end());
  return segments;
}

// FSDP (ZeRO-3): before each segment that reads parameters, an all_gather
// node makes the unit's full parameters, which the segment's nodes read, so
// the simulator frees them after the segment's last node. The next segment's
// gather is issued before this segment runs (prefetch): two gathers live.
void InsertGathers(Graph* graph, const std::vector<int64_t>& full_bytes) {
  const std::vector<Segment> segments = FindSegments(*graph, full_bytes);
  if (segments.empty()) return;
  std::vector<TensorId> gathered(segments.size());
  std::vector<Node> gathers(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    const Node& first = graph->nodes[s.first];
    const std::string unit = ModuleUnit(first.scope);
    const std::string name = "fsdp.all_gather." + (unit.empty() ? "root" : unit) + "." +
                             std::string(ToString(first.phase)) + "." + std::to_string(i);
    gathered[i] = static_cast<TensorId>(graph->tensors.size());
    graph->tensors.push_back({name, s.full_bytes, TensorKind::kActivation, kNoId, kNoId});
    Node& gather = gathers[i];
    gather.name = name;
    gather.op = "all_gather";
    gather.scope = first.scope;
    gather.phase = first.phase;
    gather.inputs = s.params;
    gather.outputs = {gathered[i]};
    gather.flops = 0;
    for (NodeId n = s.first; n < s.end; ++n) graph->nodes[n].inputs.push_back(gathered[i]);
  }
  std::vector<Node> nodes;
  nodes.reserve(graph->nodes.size() + segments.size());
  size_t next = 0;      // next segment to start
  size_t issued = 0;    // gathers emitted so far
  for (NodeId n = 0; n < graph->nodes.size(); ++n) {
    if (next < segments.size() && segments[next].first == n) {
      // This segment's gather, if not prefetched, then the next one's,
      // unless the next one belongs to another phase (no prefetch across
      // the forward/backward boundary's loss computation is assumed).
      while (issued <= next) nodes.push_back(std::move(gathers[issued++]));
      if (issued < segments.size() &&
          graph->nodes[segments[issued].first].phase == graph->nodes[n].phase) {
        nodes.push_back(std::move(gathers[issued++]));
      }
      ++next;
    }
    nodes.push_back(std::move(graph->nodes[n]));
  }
  graph->nodes = std::move(nodes);
}

int64_t GradientBytes(const Graph& graph) {
  int64_t total = 0;
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (IsRootOf(graph, t, TensorKind::kGradient)) total += graph.tensors[t].bytes;
  }
  return total > 0 ? total : graph.training.implicit_gradient_bytes;
}

// DDP's flat gradient buckets: allocated when the model is wrapped, so
// resident all step. Their total is the gradients' bytes whatever the cap
// (each gradient sits in exactly one bucket). With gradient_as_bucket_view
// the gradients are views of the buckets and cost nothing of their own.
void AddBuckets(Graph* graph, const ParallelLayout& layout) {
  const int64_t bytes = GradientBytes(*graph);
  if (bytes == 0) return;
  graph->tensors.push_back({"ddp.grad_buckets", bytes, TensorKind::kBuffer, kNoId, kNoId});
  if (layout.grad_buckets != "view") return;
  // Autograd still makes each gradient; DDP's hook copies it into its
  // bucket view and drops it: it lives while its producer runs.
  for (Node& node : graph->nodes) {
    for (TensorId out : node.outputs) {
      if (IsRootOf(*graph, out, TensorKind::kGradient)) {
        node.workspace_bytes += graph->tensors[out].bytes;
      }
    }
  }
  for (TensorId t = 0; t + 1 < graph->tensors.size(); ++t) {
    if (IsRootOf(*graph, t, TensorKind::kGradient)) graph->tensors[t].bytes = 0;
  }
  graph->training.implicit_gradient_bytes = 0;
}

// ZeroRedundancyOptimizer on one rank: the state of parameters it does not
// own is not there, and the optimizer nodes that read it (or what such a
// node made) do not run. State that names no parameter keeps `share`.
template <typename Share>
void KeepOwnedState(Graph* g, const std::vector<TensorId>& owned, Share share) {
  const std::vector<TensorId> owners = OptimizerStateOwners(*g);
  std::vector<uint8_t> mine(g->tensors.size(), 0), foreign(g->tensors.size(), 0);
  for (TensorId t : owned) mine[t] = 1;
  for (TensorId t = 0; t < g->tensors.size(); ++t) {
    if (!IsRootOf(*g, t, TensorKind::kOptimizerState)) continue;
    const TensorId owner = owners[t];
    if (owner == kNoId) {
      g->tensors[t].bytes = share(g->tensors[t].bytes);
    } else if (!mine[owner]) {
      g->tensors[t].bytes = 0;
      foreign[t] = 1;
    }
  }
  for (TensorId t = 0; t < g->tensors.size(); ++t) {
    if (IsRootOf(*g, t, TensorKind::kParameter) && !mine[t]) foreign[t] = 1;
  }
  std::vector<Node> nodes;
  for (Node& node : g->nodes) {
    bool skip = false;
    if (node.phase == Phase::kOptimizer) {
      for (TensorId in : node.inputs) skip = skip || foreign[g->StorageRoot(in)] || foreign[in];
    }
    if (!skip) {
      nodes.push_back(std::move(node));
      continue;
    }
    for (TensorId out : node.outputs) foreign[out] = 1;
  }
  g->nodes = std::move(nodes);
}

// Shards one data-parallel rank's model state; `share(bytes)` is its part.
// `owned`: the parameters ZeroRedundancyOptimizer gave it (null: flat).
template <typename Share>
Graph ShardRank(const Graph& graph, const ParallelLayout& layout, Share share,
                const std::vector<TensorId>* owned = nullptr) {
  Graph g = graph;
  std::vector<int64_t> full_bytes(g.tensors.size());
  for (TensorId t = 0; t < g.tensors.size(); ++t) full_bytes[t] = g.tensors[t].bytes;
  TrainingState& training = g.training;
  if (layout.zero >= 1 && owned != nullptr) {
    KeepOwnedState(&g, *owned, share);
    training.extra_optimizer_bytes = share(training.extra_optimizer_bytes);
  } else if (layout.zero >= 1) {
    for (TensorId t = 0; t < g.tensors.size(); ++t) {
      if (IsRootOf(g, t, TensorKind::kOptimizerState)) g.tensors[t].bytes = share(full_bytes[t]);
    }
    training.extra_optimizer_bytes = share(training.extra_optimizer_bytes);
  }
  if (layout.zero >= 2) {
    // Reduce-scatter: each node that makes or accumulates a gradient holds
    // the full gradient while it runs (its workspace); the shard stays.
    for (Node& node : g.nodes) {
      for (TensorId out : node.outputs) {
        if (g.tensors[out].kind != TensorKind::kGradient) continue;
        const TensorId root = g.StorageRoot(out);
        node.workspace_bytes += full_bytes[root] - share(full_bytes[root]);
      }
    }
    for (TensorId t = 0; t < g.tensors.size(); ++t) {
      if (IsRootOf(g, t, TensorKind::kGradient)) g.tensors[t].bytes = share(full_bytes[t]);
    }
    training.implicit_gradient_bytes = share(training.implicit_gradient_bytes);
  }
  if (layout.zero >= 3) {
    for (TensorId t = 0; t < g.tensors.size(); ++t) {
      if (IsRootOf(g, t, TensorKind::kParameter)) g.tensors[t].bytes = share(full_bytes[t]);
    }
    training.extra_parameter_bytes = share(training.extra_parameter_bytes);
    InsertGathers(&g, full_bytes);
  }
  // DDP wraps the model only when there are data-parallel ranks.
  const bool ddp = layout.dp > 1 && (layout.zero == 0 ||
                                     (layout.zero == 1 && layout.zero_partition == "params"));
  if (ddp) AddBuckets(&g, layout);
  g.Finalize();
  return g;
}

}  // namespace

std::vector<TensorId> OptimizerStateOwners(const Graph& graph) {
  std::unordered_map<std::string, TensorId> params;
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (IsRootOf(graph, t, TensorKind::kParameter)) params.emplace(graph.tensors[t].name, t);
  }
  std::vector<TensorId> owners(graph.tensors.size(), kNoId);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (!IsRootOf(graph, t, TensorKind::kOptimizerState)) continue;
    const std::string& name = graph.tensors[t].name;
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) continue;
    auto found = params.find(name.substr(0, dot));
    if (found != params.end()) owners[t] = found->second;
  }
  return owners;
}

std::string ModuleUnit(const std::string& scope) {
  const std::vector<std::string> parts = ScopeComponents(scope);
  if (parts.empty()) return "";
  const bool indexed = parts.size() > 1 && !parts[1].empty() &&
                       std::all_of(parts[1].begin(), parts[1].end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  return indexed ? parts[0] + "." + parts[1] : parts[0];
}

bool ParallelLayout::IsSingleDevice() const {
  return dp == 1 && zero == 0 && tp == 1 && !sp && pp == 1 && microbatches == 1;
}

void ValidateLayout(const ParallelLayout& layout) {
  auto n = [&](const char* field) { return layout.Name(field); };
  Require(layout.dp >= 1, n("dp") + ": must be at least 1 (got " + std::to_string(layout.dp) + ")");
  Require(layout.zero >= 0 && layout.zero <= 3,
          n("zero") + ": expected 0, 1, 2 or 3 (got " + std::to_string(layout.zero) + ")");
  Require(layout.zero_partition == "flat" || layout.zero_partition == "params",
          n("zero_partition") + ": expected flat or params (got '" + layout.zero_partition + "')");
  Require(layout.zero_partition == "flat" || layout.zero == 1,
          n("zero_partition") + " params is ZeroRedundancyOptimizer, which is ZeRO stage 1 (got " +
              n("zero") + " " + std::to_string(layout.zero) + ")");
  Require(layout.grad_buckets == "copy" || layout.grad_buckets == "view",
          n("grad_buckets") + ": expected copy or view (got '" + layout.grad_buckets + "')");
  Require(layout.bucket_cap_bytes > 0, n("bucket_cap_bytes") + ": must be positive");
  Require(layout.tp >= 1, n("tp") + ": must be at least 1");
  Require(layout.pp >= 1, n("pp") + ": must be at least 1");
  Require(layout.microbatches >= 1, n("microbatches") + ": must be at least 1");
  Require(layout.virtual_stages >= 1, n("virtual_stages") + ": must be at least 1");
  Require(layout.schedule == "gpipe" || layout.schedule == "1f1b" ||
              layout.schedule == "interleaved",
          n("schedule") + ": expected gpipe, 1f1b or interleaved (got '" + layout.schedule + "')");
  Require(layout.tp_embedding == "vocab" || layout.tp_embedding == "replicated",
          n("tp_embedding") + ": expected vocab or replicated (got '" + layout.tp_embedding + "')");
  Require(!layout.sp || layout.tp > 1,
          n("sp") + ": sequence parallelism needs " + n("tp") + " of at least 2");
  Require((layout.schedule == "interleaved") == (layout.virtual_stages > 1),
          n("schedule") + " interleaved takes " + n("virtual_stages") + " 2 or more, and " +
              n("virtual_stages") + " needs " + n("schedule") + " interleaved");
  Require(layout.schedule != "interleaved" || layout.microbatches % layout.pp == 0,
          n("schedule") + " interleaved: " + n("microbatches") + " must be a multiple of " +
              n("pp") + " (got " + std::to_string(layout.microbatches) + " and " +
              std::to_string(layout.pp) + ")");
}

ShardPlan PlanShards(const Graph& graph, int dp, const std::string& partition) {
  ShardPlan plan;
  plan.owned.assign(dp, {});
  plan.owned_bytes.assign(dp, 0);
  std::vector<TensorId> params;
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (IsRootOf(graph, t, TensorKind::kParameter)) {
      params.push_back(t);
      plan.total_bytes += graph.tensors[t].bytes;
    }
  }
  if (partition != "params") {
    std::fill(plan.owned_bytes.begin(), plan.owned_bytes.end(), CeilDiv(plan.total_bytes, dp));
    return plan;
  }
  // ZeroRedundancyOptimizer: largest first (a stable sort keeps the
  // parameters' order among equals), each to the lowest rank with the
  // fewest bytes.
  std::stable_sort(params.begin(), params.end(), [&](TensorId a, TensorId b) {
    return graph.tensors[a].bytes > graph.tensors[b].bytes;
  });
  for (TensorId t : params) {
    const size_t rank = static_cast<size_t>(
        std::min_element(plan.owned_bytes.begin(), plan.owned_bytes.end()) -
        plan.owned_bytes.begin());
    plan.owned[rank].push_back(t);
    plan.owned_bytes[rank] += graph.tensors[t].bytes;
  }
  return plan;
}

namespace {

// The data-parallel ranks of one stage's graph.
void DistributeStage(const Graph& graph, const ParallelLayout& layout, int stage,
                     std::vector<RankGraph>* ranks) {
  if (layout.zero_partition != "params" || layout.zero == 0) {
    const int64_t dp = layout.dp;
    RankGraph rank;
    rank.pp_stage = stage;
    rank.count = layout.dp;
    rank.graph = ShardRank(graph, layout, [dp](int64_t bytes) { return CeilDiv(bytes, dp); });
    ranks->push_back(std::move(rank));
    return;
  }
  const ShardPlan shards = PlanShards(graph, layout.dp, layout.zero_partition);
  if (shards.total_bytes == 0) {
    throw InputError(graph.source + ": " + layout.Name("zero_partition") +
                         " params needs parameter tensors in the "
                     "graph, and it has none",
                     kExitBadInput);
  }
  // Ranks owning the same bytes have the same graph: one entry, counted.
  const size_t first = ranks->size();
  for (int r = 0; r < layout.dp; ++r) {
    const int64_t owned = shards.owned_bytes[r];
    auto same = std::find_if(ranks->begin() + first, ranks->end(), [&](const RankGraph& g) {
      return shards.owned_bytes[g.dp_rank] == owned;
    });
    if (same != ranks->end()) {
      ++same->count;
      continue;
    }
    RankGraph rank;
    rank.pp_stage = stage;
    rank.dp_rank = r;
    const int64_t total = shards.total_bytes;
    rank.graph = ShardRank(
        graph, layout, [owned, total](int64_t bytes) { return Proportion(bytes, owned, total); },
        &shards.owned[r]);
    ranks->push_back(std::move(rank));
  }
}

}  // namespace

std::vector<RankGraph> DistributeGraph(const Graph& one_device, const ParallelLayout& layout) {
  ValidateLayout(layout);
  std::vector<RankGraph> ranks;
  // Tensor parallelism first: every tp rank's graph is alike, so one stands
  // for all of them (count); pipeline stages and ZeRO shards cut it further.
  Graph tp_graph;
  if (layout.tp > 1) {
    TpSummary summary;
    tp_graph = TensorParallelGraph(one_device, layout, &summary);
    spdlog::info("tp {}{}: {} column-parallel and {} row-parallel nodes, {} collectives",
                 layout.tp, layout.sp ? " with sp" : "", summary.column, summary.row,
                 summary.collectives);
  }
  const Graph& graph = layout.tp > 1 ? tp_graph : one_device;
  auto count_tp = [&layout](std::vector<RankGraph> r) {
    for (RankGraph& rank : r) rank.count *= layout.tp;
    return r;
  };
  if (layout.pp == 1 && layout.microbatches == 1) {
    DistributeStage(graph, layout, 0, &ranks);
    return count_tp(std::move(ranks));
  }
  const std::vector<int> stage_of = AssignStages(graph, layout.pp * layout.virtual_stages);
  for (int stage = 0; stage < layout.pp; ++stage) {
    Graph g = StageGraph(graph, layout, stage, stage_of);
    ValidateGraph(g);
    DistributeStage(g, layout, stage, &ranks);
  }
  return count_tp(std::move(ranks));
}

}  // namespace ckptplan
