#include "ckptplan/dist/tensor_parallel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "ckptplan/base/errors.h"
#include "ckptplan/ir/scope.h"

namespace ckptplan {
namespace {

// "aten.addmm.default" -> "addmm", "MatMul" -> "matmul".
std::string OpBase(const std::string& op) {
  std::string s = op;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s.rfind("aten.", 0) == 0) s = s.substr(5);
  return s.substr(0, s.find('.'));
}

bool IsMatmulOp(const std::string& op) {
  const std::string base = OpBase(op);
  return base == "matmul" || base == "mm" || base == "addmm" || base == "linear" ||
         base == "gemm";
}

// A matmul's backward as graphs spell it: mm, matmul_bwd, MatMulGrad, ...
bool IsMatmulBackwardOp(const std::string& op) {
  std::string base = OpBase(op);
  for (const char* suffix : {"_bwd", "_backward", "grad"}) {
    const std::string s(suffix);
    if (base.size() > s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0) {
      base.resize(base.size() - s.size());
    }
  }
  return IsMatmulOp(base);
}

bool IsEmbeddingOp(const std::string& op) {
  const std::string base = OpBase(op);
  return base == "embedding" || base == "gather";
}

// The block of a scope: its module unit and the next component, joined by
// '/' ("h.0/attn/c_attn" and "h.0.attn" are "h.0/attn", "lm_head" is
// "lm_head").
std::string BlockOf(const std::string& scope) {
  const std::string unit = ModuleUnit(scope);
  if (unit.empty()) return "";
  const std::vector<std::string> parts = ScopeComponents(scope);
  const size_t used = unit.find('.') == std::string::npos ? 1 : 2;
  return parts.size() > used ? unit + "/" + parts[used] : unit;
}

// What the graph's parameters reach through one-input nodes (casts, views,
// transposes): per tensor, the parameter it was made from, or kNoId.
std::vector<TensorId> DerivedParams(const Graph& graph) {
  std::vector<TensorId> derived(graph.tensors.size(), kNoId);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    const Tensor& tensor = graph.tensors[t];
    if (tensor.kind == TensorKind::kParameter && tensor.alias_of == kNoId) derived[t] = t;
  }
  for (const Node& node : graph.nodes) {
    if (node.inputs.size() != 1 || derived[node.inputs[0]] == kNoId) continue;
    for (TensorId out : node.outputs) {
      if (graph.tensors[out].kind == TensorKind::kActivation ||
          graph.tensors[out].kind == TensorKind::kParameter) {
        derived[out] = derived[node.inputs[0]];
      }
    }
  }
  return derived;
}

// A linear's weight: the largest parameter it reads (directly or derived);
// kNoId when it reads none.
TensorId WeightOf(const Graph& graph, const Node& node, const std::vector<TensorId>& derived) {
  TensorId weight = kNoId;
  for (TensorId in : node.inputs) {
    const TensorId p = derived[in];
    if (p != kNoId && (weight == kNoId || graph.tensors[p].bytes > graph.tensors[weight].bytes)) {
      weight = p;
    }
  }
  return weight;
}

// The largest activation input that is not made from a parameter.
TensorId MainInput(const Graph& graph, const Node& node, const std::vector<TensorId>& derived) {
  TensorId best = kNoId;
  for (TensorId in : node.inputs) {
    if (derived[in] != kNoId || graph.tensors[in].kind != TensorKind::kActivation) continue;
    const int64_t bytes = graph.tensors[graph.StorageRoot(in)].bytes;
    if (best == kNoId || bytes > graph.tensors[graph.StorageRoot(best)].bytes) best = in;
  }
  return best;
}

// A backward node's incoming gradient: the largest activation input a
// non-forward node made (MainInput when there is none).
TensorId GradientInput(const Graph& graph, const Node& node, const std::vector<TensorId>& derived) {
  TensorId best = kNoId;
  for (TensorId in : node.inputs) {
    const TensorId root = graph.StorageRoot(in);
    if (derived[in] != kNoId || graph.tensors[in].kind != TensorKind::kActivation) continue;
    const NodeId producer = graph.tensors[root].producer;
    if (producer == kNoId || graph.nodes[producer].phase == Phase::kForward) continue;
    if (best == kNoId || graph.tensors[root].bytes > graph.tensors[graph.StorageRoot(best)].bytes) {
      best = in;
    }
  }
  return best != kNoId ? best : MainInput(graph, node, derived);
}

bool IsLinear(const Graph& graph, const Node& node, const std::vector<TensorId>& derived) {
  return node.phase == Phase::kForward && IsMatmulOp(node.op) &&
         WeightOf(graph, node, derived) != kNoId && MainInput(graph, node, derived) != kNoId;
}

// The roles and the two nodes the vocabulary rule names (kNoId when absent).
struct Roles {
  std::vector<TpRole> role;
  NodeId head = kNoId, embedding = kNoId;
};

Roles StructuralRoles(const Graph& graph, const std::vector<TensorId>& derived) {
  Roles r;
  r.role.assign(graph.nodes.size(), TpRole::kAuto);
  std::map<std::string, int> block_index;
  std::vector<int> taint(graph.tensors.size(), -1);  // block whose column made it
  std::vector<std::vector<NodeId>> columns;
  std::vector<uint8_t> has_row;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase != Phase::kForward) continue;
    const std::string block = BlockOf(node.scope);
    if (block.empty()) continue;
    auto [it, fresh] = block_index.emplace(block, static_cast<int>(columns.size()));
    if (fresh) {
      columns.emplace_back();
      has_row.push_back(0);
    }
    const int b = it->second;
    bool tainted = false;
    for (TensorId in : node.inputs) tainted = tainted || taint[graph.StorageRoot(in)] == b;
    if (IsLinear(graph, node, derived)) {
      if (tainted && !columns[b].empty()) {
        r.role[n] = TpRole::kRow;
        has_row[b] = 1;
        continue;
      }
      r.role[n] = TpRole::kColumn;
      columns[b].push_back(n);
      tainted = true;
    }
    if (!tainted) continue;
    for (TensorId out : node.outputs) taint[graph.StorageRoot(out)] = b;
  }
  // A block without a row-parallel linear stays replicated.
  for (size_t b = 0; b < columns.size(); ++b) {
    if (has_row[b]) continue;
    for (NodeId n : columns[b]) r.role[n] = TpRole::kAuto;
  }
  for (NodeId n = graph.nodes.size(); n-- > 0;) {
    if (r.role[n] == TpRole::kAuto && IsLinear(graph, graph.nodes[n], derived)) {
      r.head = n;
      break;
    }
  }
  int64_t largest = -1;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase != Phase::kForward || !IsEmbeddingOp(node.op)) continue;
    const bool reads_input =
        std::any_of(node.inputs.begin(), node.inputs.end(), [&](TensorId t) {
          return graph.tensors[graph.StorageRoot(t)].kind == TensorKind::kInput;
        });
    const TensorId weight = WeightOf(graph, node, derived);
    if (reads_input && weight != kNoId && graph.tensors[weight].bytes > largest) {
      largest = graph.tensors[weight].bytes;
      r.embedding = n;
    }
  }
  return r;
}

Roles FindRoles(const Graph& graph, const std::string& tp_embedding,
                const std::vector<TensorId>& derived) {
  const bool given = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                 [](const Node& n) { return n.tp != TpRole::kAuto; });
  if (given) {
    Roles r;
    for (const Node& node : graph.nodes) {
      r.role.push_back(node.tp == TpRole::kReplicated ? TpRole::kAuto : node.tp);
    }
    return r;
  }
  Roles r = StructuralRoles(graph, derived);
  if (tp_embedding == "vocab") {
    if (r.head != kNoId) r.role[r.head] = TpRole::kColumn;
    if (r.embedding != kNoId) r.role[r.embedding] = TpRole::kRow;
  }
  return r;
}

enum class Shard : uint8_t { kFull, kTp, kSp };

// Per gradient root, its parameter: one the producer reads (directly or
// derived) with the same bytes, else one whose value or optimizer state a
// node reads beside the gradient (the optimizer), same bytes; kNoId if none.
std::vector<TensorId> GradientParams(const Graph& graph, const std::vector<TensorId>& derived,
                                     const std::vector<TensorId>& owners) {
  std::vector<TensorId> param(graph.tensors.size(), kNoId);
  auto is_grad_root = [&](TensorId t) {
    return graph.tensors[t].kind == TensorKind::kGradient && graph.tensors[t].alias_of == kNoId;
  };
  auto match = [&](const Node& node, TensorId grad) {
    for (TensorId in : node.inputs) {
      const TensorId root = graph.StorageRoot(in);
      TensorId p = derived[in] != kNoId ? derived[in] : derived[root];
      if (p == kNoId) p = owners[root];
      if (p != kNoId && graph.tensors[p].bytes == graph.tensors[grad].bytes) return p;
    }
    return kNoId;
  };
  for (const Node& node : graph.nodes) {
    for (TensorId out : node.outputs) {
      if (is_grad_root(out) && param[out] == kNoId) param[out] = match(node, out);
    }
  }
  for (const Node& node : graph.nodes) {
    for (TensorId in : node.inputs) {
      const TensorId root = graph.StorageRoot(in);
      if (is_grad_root(root) && param[root] == kNoId) param[root] = match(node, root);
    }
  }
  return param;
}

// True when `t` is `of` or an alias descending from it.
bool InFamily(const Graph& graph, TensorId t, TensorId of) {
  for (; t != kNoId; t = graph.tensors[t].alias_of) {
    if (t == of) return true;
  }
  return false;
}

// Reads `t` or an alias descending from it.
bool ReadsFamily(const Graph& graph, const Node& node, TensorId of) {
  return std::any_of(node.inputs.begin(), node.inputs.end(),
                     [&](TensorId in) { return InFamily(graph, in, of); });
}

// The rewrite: node kinds the label pass must know, and what to insert.
struct Surgery {
  std::vector<std::vector<Node>> before, after;  // per original node
  std::vector<std::vector<TensorId>> extra_inputs;
  std::vector<uint8_t> column_like, row_like, column_bwd;  // per original node
};

class TpBuilder {
 public:
  TpBuilder(const Graph& graph, const ParallelLayout& layout)
      : in_(graph), layout_(layout), tp_(layout.tp), derived_(DerivedParams(graph)),
        owners_(OptimizerStateOwners(graph)) {
    roles_ = FindRoles(graph, layout.tp_embedding, derived_);
    grad_param_ = GradientParams(graph, derived_, owners_);
  }

  Graph Build(TpSummary* summary) {
    const size_t nodes = in_.nodes.size();
    sharded_param_.assign(in_.tensors.size(), 0);
    column_weight_.assign(in_.tensors.size(), 0);
    row_weight_.assign(in_.tensors.size(), 0);
    s_.before.assign(nodes, {});
    s_.after.assign(nodes, {});
    s_.extra_inputs.assign(nodes, {});
    s_.column_like.assign(nodes, 0);
    s_.row_like.assign(nodes, 0);
    s_.column_bwd.assign(nodes, 0);
    ClassifyNodes(summary);
    if (summary != nullptr && summary->column + summary->row == 0) {
      throw InputError(in_.source + ": " + layout_.Name("tp") + " " + std::to_string(tp_) +
                           ": no column- or row-parallel node found (docs/distributed.md, "
                           "tensor parallelism: the rule, or \"tp\" fields in a JSON graph)",
                       kExitBadInput);
    }
    out_ = in_;
    PlanCollectives();
    Assemble();
    Label();
    Resize();
    if (summary != nullptr) summary->collectives = collectives_;
    out_.Finalize();
    return std::move(out_);
  }

 private:
  void ClassifyNodes(TpSummary* summary) {
    int column = 0, row = 0;
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      const TpRole role = roles_.role[n];
      const TensorId weight = WeightOf(in_, node, derived_);
      if (role == TpRole::kColumn) {
        ++column;
        for (TensorId t : node.inputs) {
          if (derived_[t] != kNoId) sharded_param_[derived_[t]] = 1;
        }
      } else if (role == TpRole::kRow) {
        ++row;
        if (weight != kNoId) sharded_param_[weight] = 1;
      }
      // Under --sp a replicated head still reads the gathered sequence and
      // a replicated embedding's output is still split into shards.
      const bool head = layout_.sp && n == roles_.head;
      const bool embedding = layout_.sp && n == roles_.embedding;
      if ((role == TpRole::kColumn || head) && weight != kNoId) {
        s_.column_like[n] = 1;
        column_weight_[weight] = 1;
      }
      if (role == TpRole::kRow || embedding) {
        s_.row_like[n] = 1;
        if (weight != kNoId && IsMatmulOp(node.op)) row_weight_[weight] = 1;
      }
    }
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      if (node.phase != Phase::kBackward || !IsMatmulBackwardOp(node.op)) continue;
      if (IsDerivation(node) || MainInput(in_, node, derived_) == kNoId) continue;
      for (TensorId in : node.inputs) {
        if (derived_[in] != kNoId && column_weight_[derived_[in]]) s_.column_bwd[n] = 1;
      }
    }
    if (summary != nullptr) {
      summary->column = column;
      summary->row = row;
    }
  }

  bool IsDerivation(const Node& node) const {
    return node.inputs.size() == 1 && derived_[node.inputs[0]] != kNoId;
  }

  // The largest activation output (the partial sum an all-reduce finishes).
  TensorId MainOutput(const Node& node) const {
    TensorId best = kNoId;
    for (TensorId out : node.outputs) {
      const Tensor& t = in_.tensors[out];
      if (t.kind != TensorKind::kActivation || t.alias_of != kNoId) continue;
      if (best == kNoId || t.bytes > in_.tensors[best].bytes) best = out;
    }
    return best;
  }

  TensorId NewTensor(const std::string& name, int64_t bytes) {
    out_.tensors.push_back({name, bytes, TensorKind::kActivation, kNoId, kNoId});
    return static_cast<TensorId>(out_.tensors.size() - 1);
  }

  Node Collective(const std::string& op, const Node& near, std::vector<TensorId> inputs,
                  std::vector<TensorId> outputs, Phase phase) {
    Node c;
    c.name = "tp." + op + "." + near.name;
    c.op = op;
    c.scope = near.scope;
    c.phase = phase;
    c.inputs = std::move(inputs);
    c.outputs = std::move(outputs);
    c.flops = 0;
    ++collectives_;
    return c;
  }

  // A full copy of `of` gathered from the shards, read by `readers` (the
  // first of which it precedes).
  void Gather(TensorId of, const std::vector<NodeId>& readers, Phase phase) {
    if (readers.empty()) return;
    const Node& first = in_.nodes[readers.front()];
    const TensorId full =
        NewTensor("tp.all_gather." + first.name, in_.tensors[in_.StorageRoot(of)].bytes);
    gathered_.push_back(full);
    s_.before[readers.front()].push_back(Collective("all_gather", first, {of}, {full}, phase));
    for (NodeId r : readers) s_.extra_inputs[r].push_back(full);
  }

  void PlanCollectives() {
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      const bool reduce_after = (s_.row_like[n] && node.phase == Phase::kForward) ||
                                s_.column_bwd[n];
      if (reduce_after) {
        const TensorId partial = MainOutput(node);
        if (partial == kNoId) continue;
        const TensorId weight = WeightOf(in_, node, derived_);
        const bool sums = weight != kNoId && sharded_param_[weight];
        if (layout_.sp) {
          const TensorId shard = NewTensor("tp.reduce_scatter." + node.name,
                                           in_.tensors[partial].bytes);
          scattered_.push_back(shard);
          rewire_.emplace_back(partial, shard);
          s_.after[n].push_back(Collective(sums ? "reduce_scatter" : "split", node, {partial},
                                           {shard}, node.phase));
        } else if (sums) {
          s_.after[n].push_back(Collective("all_reduce", node, {partial}, {}, node.phase));
        }
      }
    }
    if (!layout_.sp) return;
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      if (s_.column_like[n] && node.phase == Phase::kForward) {
        const TensorId input = MainInput(in_, node, derived_);
        Gather(input, {n}, Phase::kForward);
        // Megatron saves the shard and gathers it again for the backward.
        Gather(input, BackwardReaders(input, n), Phase::kBackward);
      }
    }
    GatherRowGradients();
  }

  std::vector<NodeId> BackwardReaders(TensorId family, NodeId from) const {
    std::vector<NodeId> readers;
    for (NodeId m = from + 1; m < in_.nodes.size(); ++m) {
      const Node& node = in_.nodes[m];
      if (node.phase == Phase::kBackward && ReadsFamily(in_, node, family)) readers.push_back(m);
    }
    return readers;
  }

  // Under --sp the output gradient of a row-parallel linear is gathered for
  // its backward (the backward of the forward's reduce-scatter), and so is
  // the gradient the embedding's backward reads.
  void GatherRowGradients() {
    std::vector<TensorId> done;
    const TensorId embedding_weight =
        roles_.embedding == kNoId ? kNoId
                                  : WeightOf(in_, in_.nodes[roles_.embedding], derived_);
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      if (node.phase != Phase::kBackward || IsDerivation(node) || s_.column_bwd[n]) continue;
      bool row = false, embedding = false;
      for (TensorId in : node.inputs) {
        if (derived_[in] != kNoId && row_weight_[derived_[in]] && IsMatmulBackwardOp(node.op)) {
          row = true;
        }
      }
      for (TensorId out : node.outputs) {
        const TensorId root = in_.StorageRoot(out);
        if (embedding_weight != kNoId && grad_param_[root] == embedding_weight) embedding = true;
      }
      if (!row && !embedding) continue;
      const TensorId input = GradientInput(in_, node, derived_);
      if (input == kNoId) continue;
      // The alias of the gradient's root this linear's backward reads
      // through; the root's other readers (the residual sum) keep the shard.
      TensorId branch = input;
      const TensorId root = in_.StorageRoot(input);
      while (in_.tensors[branch].alias_of != kNoId && in_.tensors[branch].alias_of != root) {
        branch = in_.tensors[branch].alias_of;
      }
      if (std::find(done.begin(), done.end(), branch) != done.end()) continue;
      done.push_back(branch);
      std::vector<NodeId> readers{n};
      if (branch != root && !embedding) readers = BackwardReaders(branch, 0);
      Gather(branch, readers, Phase::kBackward);
    }
  }

  // The new node order, with the collectives and the rewired reads.
  void Assemble() {
    std::vector<TensorId> replace(out_.tensors.size(), kNoId);
    for (const auto& [from, to] : rewire_) replace[from] = to;
    std::vector<Node> nodes;
    std::vector<uint8_t> col, row, col_bwd;
    auto push = [&](Node node, bool c, bool r, bool cb) {
      for (TensorId& in : node.inputs) {
        if (replace[in] == kNoId) continue;
        for (TensorId out : node.outputs) {
          if (out_.tensors[out].alias_of == in) out_.tensors[out].alias_of = replace[in];
        }
        in = replace[in];
      }
      nodes.push_back(std::move(node));
      col.push_back(c);
      row.push_back(r);
      col_bwd.push_back(cb);
    };
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      for (Node& c : s_.before[n]) push(std::move(c), false, false, false);
      Node node = in_.nodes[n];
      for (TensorId t : s_.extra_inputs[n]) node.inputs.push_back(t);
      const std::vector<TensorId> outputs = node.outputs;
      push(std::move(node), s_.column_like[n], s_.row_like[n], s_.column_bwd[n]);
      for (Node& c : s_.after[n]) {
        // The collective reads the partial sum itself, not the shard it makes.
        const TensorId partial = c.inputs.front();
        const TensorId saved = replace[partial];
        replace[partial] = kNoId;
        push(std::move(c), false, false, false);
        replace[partial] = saved;
      }
    }
    out_.nodes = std::move(nodes);
    column_like_ = std::move(col);
    row_like_ = std::move(row);
    column_bwd_ = std::move(col_bwd);
  }

  // Each tensor's shard, in execution order.
  void Label() {
    const Graph& g = out_;
    shard_.assign(g.tensors.size(), Shard::kFull);
    // A sharded parameter's state is sharded too, but for scalars (Adam's
    // step count).
    for (TensorId t = 0; t < in_.tensors.size(); ++t) {
      if (in_.tensors[t].bytes <= 8) continue;
      if (sharded_param_[t]) shard_[t] = Shard::kTp;
      if (owners_[t] != kNoId && sharded_param_[owners_[t]]) shard_[t] = Shard::kTp;
    }
    for (TensorId t : scattered_) shard_[t] = Shard::kSp;
    std::vector<uint8_t> fixed(g.tensors.size(), 0);
    for (TensorId t : scattered_) fixed[t] = 1;
    for (TensorId t : gathered_) fixed[t] = 1;
    auto root_shard = [&](TensorId t) { return shard_[g.StorageRoot(t)]; };
    for (NodeId n = 0; n < g.nodes.size(); ++n) {
      const Node& node = g.nodes[n];
      bool any_tp = false, any_sp = false;
      for (TensorId in : node.inputs) {
        any_tp = any_tp || root_shard(in) == Shard::kTp;
        any_sp = any_sp || root_shard(in) == Shard::kSp;
      }
      const bool derivation = node.inputs.size() == 1 && node.inputs[0] < derived_.size() &&
                              derived_[node.inputs[0]] != kNoId;
      for (TensorId out : node.outputs) {
        const Tensor& t = g.tensors[out];
        if (t.alias_of != kNoId || fixed[out] || IsResidentKind(t.kind)) continue;
        Shard s = Shard::kFull;
        if (t.kind == TensorKind::kGradient) {
          const TensorId p = out < grad_param_.size() ? grad_param_[out] : kNoId;
          s = p != kNoId ? shard_[p] : (any_tp ? Shard::kTp : Shard::kFull);
        } else if (derivation) {
          s = root_shard(node.inputs[0]);
        } else if (t.bytes <= 8 || (row_like_[n] && node.phase == Phase::kForward) ||
                   column_bwd_[n]) {
          s = Shard::kFull;
        } else if (any_tp) {
          s = Shard::kTp;
        } else if (any_sp && !(column_like_[n] && node.phase == Phase::kForward)) {
          s = Shard::kSp;
        }
        shard_[out] = s;
      }
    }
  }

  int64_t Share(int64_t bytes) const { return bytes <= 0 ? bytes : (bytes + tp_ - 1) / tp_; }

  void Resize() {
    Graph& g = out_;
    int64_t before = 0, after = 0;  // parameter bytes
    for (TensorId t = 0; t < g.tensors.size(); ++t) {
      Tensor& tensor = g.tensors[t];
      if (tensor.alias_of != kNoId) continue;
      const bool param = tensor.kind == TensorKind::kParameter;
      if (param) before += tensor.bytes;
      if (shard_[t] != Shard::kFull) tensor.bytes = Share(tensor.bytes);
      if (param) after += tensor.bytes;
    }
    for (Node& node : g.nodes) {
      bool sharded = false;
      for (TensorId t : node.inputs) sharded = sharded || shard_[g.StorageRoot(t)] != Shard::kFull;
      for (TensorId t : node.outputs) sharded = sharded || shard_[g.StorageRoot(t)] != Shard::kFull;
      if (!sharded) continue;
      if (node.flops > 0) node.flops /= tp_;
      if (node.time_us > 0) node.time_us /= tp_;
      node.workspace_bytes = Share(node.workspace_bytes);
    }
    // State that is not tensors of the graph follows the parameters' share.
    TrainingState& training = g.training;
    auto scale = [&](int64_t bytes) {
      if (before <= 0 || bytes <= 0) return bytes;
      return static_cast<int64_t>((static_cast<__int128>(bytes) * after + before - 1) / before);
    };
    training.extra_parameter_bytes = scale(training.extra_parameter_bytes);
    training.extra_optimizer_bytes = scale(training.extra_optimizer_bytes);
    training.implicit_gradient_bytes = scale(training.implicit_gradient_bytes);
    training.parameter_count = scale(training.parameter_count);
  }

  const Graph& in_;
  const ParallelLayout& layout_;
  const int64_t tp_;
  std::vector<TensorId> derived_, owners_, grad_param_;
  Roles roles_;
  Surgery s_;
  std::vector<uint8_t> sharded_param_, column_weight_, row_weight_;
  std::vector<std::pair<TensorId, TensorId>> rewire_;
  std::vector<TensorId> gathered_, scattered_;
  std::vector<uint8_t> column_like_, row_like_, column_bwd_;  // per node of out_
  std::vector<Shard> shard_;
  Graph out_;
  int collectives_ = 0;
};

}  // namespace

std::vector<TpRole> FindTpRoles(const Graph& graph, const std::string& tp_embedding) {
  return FindRoles(graph, tp_embedding, DerivedParams(graph)).role;
}

Graph TensorParallelGraph(const Graph& graph, const ParallelLayout& layout, TpSummary* summary) {
  TpSummary local;
  TpBuilder builder(graph, layout);
  return builder.Build(summary != nullptr ? summary : &local);
}

}  // namespace ckptplan
