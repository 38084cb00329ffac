#include "ckptplan/ir/graph.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "ckptplan/base/text_escape.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/problems.h"
#include "ckptplan/base/size.h"

namespace ckptplan {
namespace {

struct DtypeEntry {
  const char* name;
  uint32_t bytes;
};

// Names as written by PyTorch (torch.float32 -> "float32"), NumPy and ONNX.
constexpr DtypeEntry kDtypes[] = {
    {"float64", 8}, {"double", 8},     {"fp64", 8},     {"float32", 4},
    {"float", 4},   {"fp32", 4},       {"tf32", 4},     {"float16", 2},
    {"half", 2},    {"fp16", 2},       {"bfloat16", 2}, {"bf16", 2},
    {"float8_e4m3fn", 1}, {"float8_e5m2", 1}, {"fp8", 1},
    {"int64", 8},   {"long", 8},       {"uint64", 8},   {"int32", 4},
    {"int", 4},     {"uint32", 4},     {"int16", 2},    {"short", 2},
    {"uint16", 2},  {"int8", 1},       {"uint8", 1},    {"bool", 1},
    {"complex64", 8}, {"complex128", 16},
};

constexpr std::string_view kKindNames[] = {
    "activation", "input", "parameter", "buffer", "gradient", "optimizer_state"};
constexpr std::string_view kPhaseNames[] = {"forward", "backward", "optimizer"};

std::string Quote(const std::string& name) { return "'" + ShowName(name) + "'"; }

// Counts come first: everything after walks the vectors.
void CheckCounts(const Graph& graph, const Limits& limits) {
  Problems problems(graph.source);
  if (graph.nodes.size() > limits.max_nodes) {
    problems.Add(std::to_string(graph.nodes.size()) + " nodes is over the limit of " +
                 std::to_string(limits.max_nodes) + LimitHint(limits.max_nodes_hint));
  }
  if (graph.tensors.size() > limits.max_tensors) {
    problems.Add(std::to_string(graph.tensors.size()) + " tensors is over the limit of " +
                 std::to_string(limits.max_tensors) + LimitHint(limits.max_tensors_hint));
  }
  problems.ThrowIfAny();
}

// Sums in 128 bits so that no sum of int64 sizes can overflow here, and so
// that every later sum in int64 (simulator, lower bound) cannot either.
void CheckTotalBytes(const Graph& graph, const Limits& limits, Problems& problems) {
  __int128 total = 0;
  for (const Tensor& tensor : graph.tensors) {
    if (tensor.alias_of == kNoId && tensor.bytes > 0) total += tensor.bytes;
  }
  for (const Node& node : graph.nodes) {
    if (node.workspace_bytes > 0) total += node.workspace_bytes;
  }
  const TrainingState& training = graph.training;
  for (int64_t bytes : {training.extra_parameter_bytes, training.extra_buffer_bytes,
                        training.extra_optimizer_bytes, training.implicit_gradient_bytes}) {
    if (bytes < 0) {
      problems.Add("training: state bytes are negative (" + std::to_string(bytes) + ")");
    } else {
      total += bytes;
    }
  }
  if (total > limits.max_total_bytes) {
    problems.Add("tensors, workspaces and training state add up to more than the limit of " +
                 FormatBytes(limits.max_total_bytes) + " (" +
                 std::to_string(limits.max_total_bytes) + " bytes); no real model is this large");
  }
}

// An alias chain must end at a storage root. Colors: 0 unseen, 1 on the
// current walk, 2 known to end.
void CheckAliasChains(const Graph& graph, Problems& problems) {
  const size_t num_tensors = graph.tensors.size();
  std::vector<uint8_t> color(num_tensors, 0);
  std::vector<TensorId> walk;
  for (TensorId start = 0; start < num_tensors; ++start) {
    walk.clear();
    TensorId t = start;
    while (t < num_tensors && color[t] == 0) {
      color[t] = 1;
      walk.push_back(t);
      t = graph.tensors[t].alias_of;
    }
    if (t < num_tensors && color[t] == 1 && graph.tensors[t].alias_of != t) {
      problems.Add("tensor " + Quote(graph.tensors[t].name) +
                   " is on an alias_of cycle (aliases must lead to a tensor that owns storage)");
    }
    for (TensorId w : walk) color[w] = 2;
  }
}

}  // namespace

std::string_view ToString(TensorKind kind) {
  return kKindNames[static_cast<int>(kind)];
}
std::string_view ToString(Phase phase) {
  return kPhaseNames[static_cast<int>(phase)];
}
std::string_view ToString(CostUnit unit) {
  return unit == CostUnit::kMicroseconds ? "us" : "flop";
}

bool ParseTensorKind(std::string_view name, TensorKind* kind) {
  for (size_t i = 0; i < std::size(kKindNames); ++i) {
    if (kKindNames[i] == name) {
      *kind = static_cast<TensorKind>(i);
      return true;
    }
  }
  return false;
}

bool ParsePhase(std::string_view name, Phase* phase) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) {
      *phase = static_cast<Phase>(i);
      return true;
    }
  }
  return false;
}

namespace {
constexpr std::string_view kTpRoleNames[] = {"", "column", "row", "replicated"};
}  // namespace

std::string_view ToString(TpRole role) { return kTpRoleNames[static_cast<int>(role)]; }

bool ParseTpRole(std::string_view name, TpRole* role) {
  for (size_t i = 1; i < std::size(kTpRoleNames); ++i) {
    if (kTpRoleNames[i] == name) {
      *role = static_cast<TpRole>(i);
      return true;
    }
  }
  return false;
}

const std::vector<DtypeSize>& DtypeSizes() {
  static const std::vector<DtypeSize> kSizes = [] {
    std::vector<DtypeSize> sizes;
    for (const DtypeEntry& entry : kDtypes) sizes.push_back({entry.name, entry.bytes});
    return sizes;
  }();
  return kSizes;
}

bool IsCollectiveOp(std::string_view op) {
  return op == "all_gather" || op == "reduce_scatter" || op == "all_reduce" || op == "pp_recv";
}

namespace {

// Calls `add` with each character of op's base name, in order (the rule
// OpBaseName states).
template <typename Add>
void ForEachBaseNameChar(std::string_view op, Add&& add) {
  if (op.substr(0, 5) == "aten.") {
    op.remove_prefix(5);
    op = op.substr(0, op.find('.'));
  }
  for (char c : op) {
    if (c == '_') continue;
    add((c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
  }
}

// Whether op's base name is one of `names`, without allocating (no name
// looked for is longer than the buffer).
template <size_t K>
bool BaseNameIn(std::string_view op, const std::string_view (&names)[K]) {
  char buffer[32];
  size_t size = 0;
  ForEachBaseNameChar(op, [&](char c) {
    if (size < sizeof(buffer)) buffer[size] = c;
    ++size;
  });
  if (size > sizeof(buffer)) return false;
  const std::string_view name(buffer, size);
  for (const std::string_view candidate : names) {
    if (name == candidate) return true;
  }
  return false;
}

}  // namespace

std::string OpBaseName(std::string_view op) {
  std::string name;
  ForEachBaseNameChar(op, [&](char c) { name += c; });
  return name;
}

bool IsLinearOp(std::string_view op) {
  static constexpr std::string_view kLinear[] = {"mm", "addmm", "matmul", "bmm", "linear", "gemm"};
  return BaseNameIn(op, kLinear);
}

bool IsRandomOp(std::string_view op) {
  static constexpr std::string_view kRandom[] = {
      "bernoulli", "dropout", "nativedropout", "featuredropout", "alphadropout",
      "featurealphadropout", "rand", "randn", "randint", "randlike", "randnlike",
      "randintlike", "randperm", "normal", "uniform", "multinomial", "exponential",
      "geometric", "cauchy", "lognormal", "rrelu", "rreluwithnoise", "poisson",
      "randomnormal", "randomuniform", "randomnormallike", "randomuniformlike"};
  return BaseNameIn(op, kRandom);
}

uint32_t DtypeBytes(std::string_view dtype) {
  if (dtype.substr(0, 6) == "torch.") dtype.remove_prefix(6);
  for (const DtypeEntry& entry : kDtypes) {
    if (dtype == entry.name) return entry.bytes;
  }
  return 0;
}

TensorId Graph::StorageRoot(TensorId t) const {
  // Aliases are validated to form chains towards earlier tensors, so this ends.
  size_t hops = 0;
  while (tensors[t].alias_of != kNoId && hops++ <= tensors.size()) {
    t = tensors[t].alias_of;
  }
  return t;
}

double Graph::NodeCost(NodeId n) const {
  const Node& node = nodes[n];
  double cost = cost_unit == CostUnit::kMicroseconds ? node.time_us : node.flops;
  return cost > 0 ? cost : 0.0;
}

double Graph::ApproxCost(NodeId n, const ApproxOption& option) const {
  if (cost_unit == CostUnit::kFlops) return option.flops;
  if (option.time_us >= 0) return option.time_us;
  const Node& node = nodes[n];
  if (node.time_us >= 0 && node.flops > 0) return node.time_us * option.flops / node.flops;
  return -1;
}

void Graph::Finalize() {
  for (Tensor& tensor : tensors) tensor.producer = kNoId;
  bool all_timed = true, any_timed = false;
  for (NodeId n = 0; n < nodes.size(); ++n) {
    for (TensorId t : nodes[n].outputs) {
      if (t < tensors.size() && tensors[t].producer == kNoId) tensors[t].producer = n;
    }
    if (nodes[n].time_us >= 0) {
      any_timed = true;
    } else if (nodes[n].flops >= 0) {
      all_timed = false;
    }
  }
  cost_unit = any_timed && all_timed ? CostUnit::kMicroseconds : CostUnit::kFlops;
}

void ValidateGraph(const Graph& graph, const Limits& limits) {
  CheckCounts(graph, limits);
  Problems problems(graph.source);
  const size_t num_tensors = graph.tensors.size();
  std::vector<NodeId> producer(num_tensors, kNoId);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::string where = "node " + Quote(node.name);
    for (TensorId t : node.inputs) {
      if (t >= num_tensors) {
        problems.Add(where + ": input id " + std::to_string(t) + " out of range");
        continue;
      }
      if (producer[t] == kNoId && graph.tensors[t].producer != kNoId) {
        const Tensor& tensor = graph.tensors[t];
        const Node& later = graph.nodes[tensor.producer];
        problems.Add(where + " (" + std::string(ToString(node.phase)) +
                     ") reads tensor " + Quote(tensor.name) +
                     " before node " + Quote(later.name) +
                     " produces it (nodes must be listed in execution order; "
                     "a cycle also shows up this way)");
      } else if (graph.tensors[t].producer == kNoId &&
                 !IsResidentKind(graph.tensors[t].kind)) {
        problems.Add(where + " reads tensor " + Quote(graph.tensors[t].name) +
                     " of kind " + std::string(ToString(graph.tensors[t].kind)) +
                     " that no node produces (mark it kind 'input' if the "
                     "caller provides it)");
      }
    }
    for (TensorId t : node.outputs) {
      if (t >= num_tensors) {
        problems.Add(where + ": output id " + std::to_string(t) + " out of range");
        continue;
      }
      const Tensor& tensor = graph.tensors[t];
      if (producer[t] != kNoId) {
        problems.Add("tensor " + Quote(tensor.name) + " is produced by both node " +
                     Quote(graph.nodes[producer[t]].name) + " and node " +
                     Quote(node.name) + " (expected one producer)");
        continue;
      }
      producer[t] = n;
      if (IsResidentKind(tensor.kind) && tensor.alias_of == kNoId) {
        problems.Add("tensor " + Quote(tensor.name) + " of kind " +
                     std::string(ToString(tensor.kind)) + " is produced by node " +
                     Quote(node.name) +
                     "; resident tensors are not produced (mark an in-place "
                     "update with alias_of)");
      }
      if (tensor.alias_of != kNoId) {
        bool is_input = false;
        for (TensorId in : node.inputs) is_input |= (in == tensor.alias_of);
        if (!is_input) {
          problems.Add("tensor " + Quote(tensor.name) + " aliases tensor " +
                       (tensor.alias_of < num_tensors
                            ? Quote(graph.tensors[tensor.alias_of].name)
                            : std::to_string(tensor.alias_of)) +
                       ", which is not an input of its producer " + Quote(node.name));
        }
      }
    }
    if (!(node.workspace_bytes >= 0)) {
      problems.Add(where + ": workspace_bytes is negative (" +
                   std::to_string(node.workspace_bytes) + ")");
    }
    for (double cost : {node.flops, node.time_us}) {
      if (!std::isfinite(cost) || (cost < 0 && cost != -1)) {
        problems.Add(where + ": cost must be a finite number >= 0, got " +
                     std::to_string(cost));
        break;
      }
      if (cost > limits.max_node_cost) {
        char text[64];
        std::snprintf(text, sizeof(text), "cost %g is over the limit of %g", cost,
                      limits.max_node_cost);
        problems.Add(where + ": " + text);
        break;
      }
    }
  }
  for (TensorId t = 0; t < num_tensors; ++t) {
    const Tensor& tensor = graph.tensors[t];
    if (tensor.bytes < 0) {
      problems.Add("tensor " + Quote(tensor.name) + ": bytes is negative (" +
                   std::to_string(tensor.bytes) + ")");
    }
    if (tensor.alias_of != kNoId && tensor.alias_of >= num_tensors) {
      problems.Add("tensor " + Quote(tensor.name) + ": alias_of out of range");
    }
    if (tensor.alias_of == t) {
      problems.Add("tensor " + Quote(tensor.name) + " aliases itself");
    }
    if (tensor.alias_of != kNoId && tensor.producer == kNoId &&
        !IsResidentKind(tensor.kind)) {
      problems.Add("tensor " + Quote(tensor.name) +
                   " is an alias but no node produces it");
    }
  }
  CheckTotalBytes(graph, limits, problems);
  CheckAliasChains(graph, problems);
  problems.ThrowIfAny();
}

}  // namespace ckptplan
