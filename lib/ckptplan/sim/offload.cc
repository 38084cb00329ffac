#include "ckptplan/sim/offload.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

namespace ckptplan {
namespace {

constexpr double kMicrosPerSecond = 1e6;

double CopyMicros(int64_t bytes, double bytes_per_s) {
  if (bytes_per_s <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(bytes) / bytes_per_s * kMicrosPerSecond;
}

// Per storage root: how many distinct tensors of it non-forward nodes read,
// and the first non-forward node reading any of them.
struct BackwardReads {
  std::vector<uint32_t> readers_of_root;  // distinct tensors read, capped at 2
  std::vector<TensorId> read_tensor;      // the one tensor read, when one
  std::vector<NodeId> first_reader;       // per root
};

BackwardReads FindBackwardReads(const Graph& graph) {
  const size_t num_tensors = graph.tensors.size();
  BackwardReads reads{std::vector<uint32_t>(num_tensors, 0),
                      std::vector<TensorId>(num_tensors, kNoId),
                      std::vector<NodeId>(num_tensors, kNoId)};
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase == Phase::kForward) continue;
    for (TensorId t : node.inputs) {
      const TensorId root = graph.StorageRoot(t);
      if (reads.first_reader[root] == kNoId) reads.first_reader[root] = n;
      if (reads.read_tensor[root] == t) continue;
      if (reads.readers_of_root[root] < 2) ++reads.readers_of_root[root];
      reads.read_tensor[root] = t;
    }
  }
  return reads;
}

bool Offloadable(const Graph& graph, const BackwardReads& reads, TensorId t) {
  if (t >= graph.tensors.size()) return false;
  const Tensor& tensor = graph.tensors[t];
  if (tensor.kind != TensorKind::kActivation || tensor.alias_of != kNoId) return false;
  if (tensor.bytes <= 0 || tensor.producer == kNoId) return false;
  if (graph.nodes[tensor.producer].phase != Phase::kForward) return false;
  return reads.readers_of_root[t] == 1 && reads.read_tensor[t] == t;
}

// A name not yet in `names`, starting from `wanted`.
std::string UniqueName(std::unordered_set<std::string>& names, const std::string& wanted) {
  std::string name = wanted;
  for (int suffix = 2; names.count(name); ++suffix) name = wanted + "#" + std::to_string(suffix);
  names.insert(name);
  return name;
}

// Most host bytes held at once: each copy holds its host buffer from the start
// of its copy out to the end of its copy back.
int64_t HostPeak(const std::vector<OffloadCopy>& copies) {
  std::vector<std::pair<double, int64_t>> events;
  for (const OffloadCopy& copy : copies) {
    events.push_back({copy.out_start_us, copy.host_bytes});
    events.push_back({copy.in_end_us, -copy.host_bytes});
  }
  // At one instant a buffer is taken before another is given back: the
  // conservative order.
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  int64_t held = 0, peak = 0;
  for (const auto& [time, delta] : events) {
    held += delta;
    peak = std::max(peak, held);
  }
  return peak;
}

}  // namespace

std::vector<double> NodeTimes(const Graph& graph, double flops_per_us) {
  std::vector<double> times(graph.nodes.size(), 0.0);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.time_us >= 0) {
      times[n] = node.time_us;
    } else if (node.flops >= 0 && flops_per_us > 0) {
      times[n] = node.flops / flops_per_us;
    }
  }
  return times;
}

int64_t PinnedHostBytes(int64_t bytes) {
  if (bytes <= 1) return bytes;
  int64_t rounded = 1;
  while (rounded < bytes && rounded <= (std::numeric_limits<int64_t>::max() >> 1)) rounded <<= 1;
  return rounded < bytes ? bytes : rounded;
}

bool CanOffload(const Graph& graph, TensorId t) {
  return Offloadable(graph, FindBackwardReads(graph), t);
}

std::vector<TensorId> OffloadCandidates(const Graph& graph) {
  const BackwardReads reads = FindBackwardReads(graph);
  std::vector<TensorId> eligible;
  for (TensorId t : SaveCandidates(graph)) {
    if (Offloadable(graph, reads, t)) eligible.push_back(t);
  }
  return eligible;
}

OffloadedGraph ApplyOffload(const Graph& graph, std::vector<TensorId> offloaded,
                            const OffloadOptions& options) {
  std::sort(offloaded.begin(), offloaded.end());
  offloaded.erase(std::unique(offloaded.begin(), offloaded.end()), offloaded.end());
  OffloadedGraph result;
  const BackwardReads reads = FindBackwardReads(graph);
  offloaded.erase(std::remove_if(offloaded.begin(), offloaded.end(),
                                 [&](TensorId t) { return !Offloadable(graph, reads, t); }),
                  offloaded.end());
  const size_t num_nodes = graph.nodes.size();
  NodeId first_non_forward = kNoId;
  for (NodeId n = 0; n < num_nodes; ++n) {
    if (graph.nodes[n].phase != Phase::kForward) {
      first_non_forward = n;
      break;
    }
  }
  if (offloaded.empty() || first_non_forward == kNoId || first_non_forward == 0) {
    result.graph = graph;
    result.original_node.resize(num_nodes);
    for (NodeId n = 0; n < num_nodes; ++n) result.original_node[n] = n;
    result.rewritten_node = result.original_node;
    return result;
  }
  // Step start and end times on the compute timeline without waits.
  std::vector<double> start(num_nodes + 1, 0.0);
  for (NodeId n = 0; n < num_nodes; ++n) {
    const double time = n < options.node_time_us.size() ? options.node_time_us[n] : 0.0;
    start[n + 1] = start[n] + std::max(0.0, time);
  }
  const NodeId last_forward = first_non_forward - 1;
  const double forward_end = start[first_non_forward];

  std::vector<OffloadCopy>& copies = result.copies;
  for (TensorId t : offloaded) {
    OffloadCopy copy;
    copy.tensor = t;
    copy.bytes = graph.tensors[t].bytes;
    copy.host_bytes = PinnedHostBytes(copy.bytes);
    copy.first_reader = reads.first_reader[t];
    copies.push_back(copy);
  }

  // Copies out, in the order their tensors are made (ties: tensor id).
  std::vector<size_t> order(copies.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto made_at = [&](size_t i) { return start[graph.tensors[copies[i].tensor].producer + 1]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return made_at(a) < made_at(b); });
  double engine_free = 0, last_out_end = 0;
  for (size_t i : order) {
    OffloadCopy& copy = copies[i];
    copy.out_start_us = std::max(made_at(i), engine_free);
    copy.out_end_us = copy.out_start_us + CopyMicros(copy.bytes, options.link.to_host_bytes_per_s);
    engine_free = copy.out_end_us;
    last_out_end = std::max(last_out_end, copy.out_end_us);
    // The step during which the copy completes, at most the forward's last.
    NodeId k = graph.tensors[copy.tensor].producer;
    while (k < last_forward && start[k + 1] < copy.out_end_us) ++k;
    copy.freed_after = k;
  }
  // The backward waits for every copy out to complete before it frees them.
  const double out_wait = std::max(0.0, last_out_end - forward_end);
  auto backward_start = [&](NodeId n) { return start[n] + out_wait; };

  // Copies back: as late as each still meets its deadline, latest deadline
  // first (ties: the higher tensor id is later), then never before the
  // backward begins nor before the copy out completed.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return copies[a].first_reader < copies[b].first_reader;
  });
  double next_start = std::numeric_limits<double>::infinity();
  for (size_t j = order.size(); j-- > 0;) {
    OffloadCopy& copy = copies[order[j]];
    const double duration = CopyMicros(copy.bytes, options.link.to_device_bytes_per_s);
    const double end = std::min(backward_start(copy.first_reader), next_start);
    double planned = end - duration;
    planned = std::max({planned, backward_start(first_non_forward), copy.out_end_us});
    next_start = planned;
    NodeId r = first_non_forward;
    while (r < copy.first_reader && backward_start(r + 1) <= planned) ++r;
    copy.reloaded_before = r;
  }

  // The backward on its real timeline: a copy back starts with its reload
  // step, once the engine is free; a reader waits for its copy.
  result.node_start_us.assign(start.begin(), start.end() - 1);
  result.node_end_us.assign(start.begin() + 1, start.end());
  double now = forward_end + out_wait;
  double wait = out_wait;
  engine_free = now;
  size_t next_copy = 0;
  std::vector<size_t> by_reload = order;
  std::stable_sort(by_reload.begin(), by_reload.end(), [&](size_t a, size_t b) {
    return copies[a].reloaded_before < copies[b].reloaded_before;
  });
  for (NodeId n = first_non_forward; n < num_nodes; ++n) {
    for (; next_copy < by_reload.size() && copies[by_reload[next_copy]].reloaded_before == n;
         ++next_copy) {
      OffloadCopy& copy = copies[by_reload[next_copy]];
      copy.in_start_us = std::max({now, engine_free, copy.out_end_us});
      copy.in_end_us =
          copy.in_start_us + CopyMicros(copy.bytes, options.link.to_device_bytes_per_s);
      engine_free = copy.in_end_us;
    }
    for (const OffloadCopy& copy : copies) {
      if (copy.first_reader != n || copy.in_end_us <= now) continue;
      wait += copy.in_end_us - now;
      now = copy.in_end_us;
    }
    result.node_start_us[n] = now;
    now += start[n + 1] - start[n];
    result.node_end_us[n] = now;
  }
  result.exposed_us = wait;
  result.exposed_cost = wait * options.cost_per_us;
  result.host_peak_bytes = HostPeak(copies);
  result.over_host_budget =
      options.host_budget_bytes && result.host_peak_bytes > *options.host_budget_bytes;

  // The rewrite: original tensors keep their ids; each reload's copy is new.
  Graph& out = result.graph;
  out.source = graph.source;
  out.training = graph.training;
  out.tensors = graph.tensors;
  std::unordered_set<std::string> tensor_names, node_names;
  for (const Tensor& tensor : graph.tensors) tensor_names.insert(tensor.name);
  for (const Node& node : graph.nodes) node_names.insert(node.name);
  std::vector<TensorId> reloaded(graph.tensors.size(), kNoId);
  for (const OffloadCopy& copy : copies) {
    Tensor copy_tensor;
    copy_tensor.name = UniqueName(tensor_names, graph.tensors[copy.tensor].name + "@reload");
    copy_tensor.bytes = copy.bytes;
    reloaded[copy.tensor] = static_cast<TensorId>(out.tensors.size());
    out.tensors.push_back(std::move(copy_tensor));
  }
  std::vector<std::vector<size_t>> reload_at(num_nodes), wait_at(num_nodes);
  for (size_t i : by_reload) reload_at[copies[i].reloaded_before].push_back(i);
  for (size_t i = 0; i < copies.size(); ++i) wait_at[copies[i].freed_after].push_back(i);
  for (NodeId n = 0; n < num_nodes; ++n) {
    for (size_t i : reload_at[n]) {
      Node reload;
      reload.name = UniqueName(node_names, "reload:" + graph.tensors[copies[i].tensor].name);
      reload.op = "reload";
      reload.phase = Phase::kBackward;
      reload.outputs = {reloaded[copies[i].tensor]};
      out.nodes.push_back(std::move(reload));
      result.original_node.push_back(kNoId);
    }
    Node node = graph.nodes[n];
    if (node.phase != Phase::kForward) {
      for (TensorId& t : node.inputs) {
        if (reloaded[t] != kNoId) t = reloaded[t];
      }
    }
    result.rewritten_node.push_back(static_cast<NodeId>(out.nodes.size()));
    out.nodes.push_back(std::move(node));
    result.original_node.push_back(n);
    for (size_t i : wait_at[n]) {
      Node done;
      done.name = UniqueName(node_names, "offload-wait:" + graph.tensors[copies[i].tensor].name);
      done.op = "offload_wait";
      done.phase = Phase::kForward;
      done.inputs = {copies[i].tensor};
      out.nodes.push_back(std::move(done));
      result.original_node.push_back(kNoId);
    }
  }
  out.Finalize();
  return result;
}

SaveSet KeepOnRewrite(const SaveSet& keep, const OffloadedGraph& offloaded) {
  SaveSet out(offloaded.graph.tensors.size(), 1);
  std::copy(keep.begin(), keep.begin() + std::min(keep.size(), out.size()), out.begin());
  for (const OffloadCopy& copy : offloaded.copies) out[copy.tensor] = 1;
  return out;
}

}  // namespace ckptplan
