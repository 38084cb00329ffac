#include "ckptplan/dist/pipeline.h"

#include <algorithm>
#include <map>
#include <set>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

// The layer index of a unit "<name>.<digits>"; -1 for other units.
int LayerIndex(const std::string& unit) {
  const size_t dot = unit.rfind('.');
  if (dot == std::string::npos || dot + 1 == unit.size()) return -1;
  for (size_t i = dot + 1; i < unit.size(); ++i) {
    if (unit[i] < '0' || unit[i] > '9') return -1;
  }
  return std::stoi(unit.substr(dot + 1));
}

bool SharedKind(TensorKind kind) {
  return kind == TensorKind::kParameter || kind == TensorKind::kBuffer ||
         kind == TensorKind::kOptimizerState;
}

// Builds one stage's graph.
class StageBuilder {
 public:
  StageBuilder(const Graph& graph, const ParallelLayout& layout, int stage,
               const std::vector<int>& stage_of_node)
      : in_(graph), layout_(layout), stage_(stage), stage_of_(stage_of_node) {
    out_.source = graph.source;
    out_.cost_unit = graph.cost_unit;
    shared_.assign(in_.tensors.size(), kNoId);
    const int chunks = layout_.schedule == "interleaved" ? layout_.virtual_stages : 1;
    forward_.resize(chunks);
    backward_.resize(chunks);
    recv_.resize(chunks);
    recv_grad_.resize(chunks);
    send_.resize(chunks);
    send_grad_.resize(chunks);
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      if (!Here(n)) continue;
      (in_.nodes[n].phase == Phase::kForward ? forward_ : backward_)[Chunk(n)].push_back(n);
      if (in_.nodes[n].phase == Phase::kForward) continue;
      for (const auto* list : {&in_.nodes[n].inputs, &in_.nodes[n].outputs}) {
        for (TensorId t : *list) {
          const TensorId root = in_.StorageRoot(t);
          if (in_.tensors[root].kind == TensorKind::kGradient) last_gradient_use_[root] = n;
        }
      }
    }
    FindBoundaries();
  }

  Graph Build() {
    map_.assign(layout_.microbatches, std::vector<TensorId>(in_.tensors.size(), kNoId));
    for (const ScheduleSlot& slot :
         StageSchedule(layout_.schedule, layout_.pp, stage_, layout_.microbatches,
                       static_cast<int>(forward_.size()))) {
      slot.forward ? Forward(slot.microbatch, slot.chunk) : Backward(slot.microbatch, slot.chunk);
    }
    Optimizer();
    Scale();
    out_.Finalize();
    return std::move(out_);
  }

 private:
  // Node n runs on this rank: its (virtual) stage is this stage, or with
  // the interleaved schedule one of this rank's chunks (virtual stage
  // chunk * pp + rank, Megatron's order).
  bool Here(NodeId n) const {
    return n != kNoId && stage_of_[n] >= 0 && stage_of_[n] % layout_.pp == stage_;
  }
  int Chunk(NodeId n) const { return stage_of_[n] / layout_.pp; }
  bool ForwardMade(TensorId t) const {
    const NodeId p = in_.tensors[t].producer;
    return p != kNoId && in_.nodes[p].phase == Phase::kForward;
  }

  // What crosses the stage's edges, by storage: reading a tensor whose
  // storage another stage made is receiving that storage (once per
  // microbatch, however many views of it are read); in storage id order.
  void FindBoundaries() {
    const size_t chunks = forward_.size();
    std::vector<std::set<TensorId>> recv(chunks), recv_grad(chunks), send(chunks),
        send_grad(chunks);
    auto crossing = [&](TensorId t) {
      const TensorId root = in_.StorageRoot(t);
      // A parameter gradient made elsewhere (a tied weight) is not sent:
      // each stage accumulates its own copy.
      if (in_.tensors[root].kind == TensorKind::kGradient) return kNoId;
      return in_.tensors[root].producer == kNoId ? kNoId : root;
    };
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      if (stage_of_[n] < 0) continue;
      const bool forward = in_.nodes[n].phase == Phase::kForward;
      for (TensorId t : in_.nodes[n].inputs) {
        const TensorId root = crossing(t);
        if (root == kNoId) continue;
        const NodeId producer = in_.tensors[root].producer;
        if (Here(n) && !Here(producer)) {
          if (ForwardMade(root)) {
            recv[Chunk(n)].insert(root);
          } else if (!forward) {
            recv_grad[Chunk(n)].insert(root);
          }
        } else if (!Here(n) && Here(producer)) {
          (ForwardMade(root) ? send : send_grad)[Chunk(producer)].insert(root);
        }
      }
    }
    for (size_t c = 0; c < chunks; ++c) {
      recv_[c].assign(recv[c].begin(), recv[c].end());
      recv_grad_[c].assign(recv_grad[c].begin(), recv_grad[c].end());
      send_[c].assign(send[c].begin(), send[c].end());
      send_grad_[c].assign(send_grad[c].begin(), send_grad[c].end());
    }
  }

  TensorId Add(const std::string& name, int64_t bytes, TensorKind kind, TensorId alias_of) {
    out_.tensors.push_back({name, bytes, kind, alias_of, kNoId});
    return static_cast<TensorId>(out_.tensors.size() - 1);
  }

  std::string Prefix(int m) const {
    return layout_.microbatches > 1 ? "mb" + std::to_string(m) + "." : "";
  }

  // The stage's tensor for `t` in microbatch `m`, made on first use for
  // what is not made by a node (state, inputs).
  TensorId Get(int m, TensorId t) {
    const Tensor& tensor = in_.tensors[t];
    if (SharedKind(tensor.kind) && tensor.producer == kNoId) {
      if (shared_[t] == kNoId) {
        const TensorId alias = tensor.alias_of == kNoId ? kNoId : Get(m, tensor.alias_of);
        shared_[t] = Add(tensor.name, tensor.bytes, tensor.kind, alias);
      }
      return shared_[t];
    }
    if (map_[m][t] == kNoId && tensor.producer != kNoId && !Here(tensor.producer)) {
      // A view another stage made: the stage's own or received storage.
      return map_[m][t] = Get(m, in_.StorageRoot(t));
    }
    if (map_[m][t] == kNoId && tensor.producer == kNoId) {
      const TensorId alias = tensor.alias_of == kNoId ? kNoId : Get(m, tensor.alias_of);
      map_[m][t] = Add(Prefix(m) + tensor.name, tensor.bytes, tensor.kind, alias);
    }
    if (map_[m][t] == kNoId) {
      throw InputError(in_.source + ": pipeline stage " + std::to_string(stage_) +
                       ": tensor '" + tensor.name + "' is read before the stage makes or "
                       "receives it");
    }
    return map_[m][t];
  }

  // A gradient output: the first one of a parameter's gradient on this stage
  // makes its storage (AccumulateGrad keeps the tensor autograd made). A
  // later one (microbatches, tied uses) is made fresh, a temporary, and
  // added into the storage in place once the autograd function that made it
  // has ended: by a grad_accumulate node after the stage's last node of the
  // microbatch's backward that reads it or a view of it.
  TensorId GradientOutput(int m, TensorId t) {
    const TensorId root = in_.StorageRoot(t);
    auto found = grad_root_.find(root);
    if (found == grad_root_.end()) {
      const TensorId made = Add(in_.tensors[root].name, in_.tensors[root].bytes,
                                TensorKind::kGradient, kNoId);
      grad_root_.emplace(root, made);
      map_[m][t] = made;
      return made;
    }
    map_[m][t] = Add(Prefix(m) + in_.tensors[t].name + ".fresh", in_.tensors[root].bytes,
                     TensorKind::kActivation, kNoId);
    fresh_.push_back({root, map_[m][t]});
    return map_[m][t];
  }

  // Emits the grad_accumulate nodes of fresh gradients whose last reader on
  // the stage, in this microbatch's backward, is original node `n`.
  void Accumulate(int m, NodeId n) {
    for (size_t i = 0; i < fresh_.size();) {
      if (last_gradient_use_.at(fresh_[i].first) != n) {
        ++i;
        continue;
      }
      Node add;
      add.name = Prefix(m) + "grad_accumulate." + in_.tensors[fresh_[i].first].name;
      add.op = "grad_accumulate";
      add.phase = Phase::kBackward;
      add.flops = static_cast<double>(in_.tensors[fresh_[i].first].bytes);
      add.inputs = {grad_root_.at(fresh_[i].first), fresh_[i].second};
      out_.nodes.push_back(std::move(add));
      fresh_.erase(fresh_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  void Copy(int m, NodeId n) {
    const Node& node = in_.nodes[n];
    Node copy;
    copy.name = Prefix(m) + node.name;
    copy.op = node.op;
    copy.scope = node.scope;
    copy.phase = node.phase;
    copy.flops = node.flops;
    copy.time_us = node.time_us;
    copy.workspace_bytes = node.workspace_bytes;
    for (TensorId t : node.inputs) {
      if (in_.tensors[t].kind != TensorKind::kGradient) {
        copy.inputs.push_back(Get(m, t));
        continue;
      }
      // Reading a gradient is reading what this microbatch made of it, else
      // the stage's storage of it, if made.
      auto found = grad_root_.find(in_.StorageRoot(t));
      const TensorId read = map_[m][t] != kNoId ? map_[m][t]
                            : found != grad_root_.end() ? found->second
                                                        : kNoId;
      if (read != kNoId &&
          std::find(copy.inputs.begin(), copy.inputs.end(), read) == copy.inputs.end()) {
        copy.inputs.push_back(read);
      }
    }
    for (TensorId t : node.outputs) {
      const Tensor& tensor = in_.tensors[t];
      if (tensor.kind == TensorKind::kGradient) {
        copy.outputs.push_back(GradientOutput(m, t));
        continue;
      }
      TensorId alias = kNoId;
      if (tensor.alias_of != kNoId && in_.tensors[tensor.alias_of].kind == TensorKind::kGradient) {
        // A view of a gradient: of this microbatch's, else of the storage.
        alias = map_[m][tensor.alias_of] != kNoId
                    ? map_[m][tensor.alias_of]
                    : grad_root_.at(in_.StorageRoot(tensor.alias_of));
      } else if (tensor.alias_of != kNoId) {
        alias = Get(m, tensor.alias_of);
      }
      map_[m][t] = Add(Prefix(m) + tensor.name, tensor.bytes, tensor.kind, alias);
      copy.outputs.push_back(map_[m][t]);
    }
    out_.nodes.push_back(std::move(copy));
  }

  // A pp_recv node; backward phase so what it makes is not a candidate (it
  // cannot be recomputed, only kept) and lives to its last read.
  // A pp_recv node; backward phase so what it makes is not a candidate (it
  // cannot be recomputed, only kept) and lives to its last read. It also
  // completes the sends still in flight (their tensors live until it has
  // run): Megatron posts each send with the next receive
  // (send_forward_recv_backward, send_backward_recv_forward) and waits for
  // both.
  // ".stage<s>", and ".chunk<c>" with several chunks.
  std::string Where(int chunk) const {
    return ".stage" + std::to_string(stage_) +
           (forward_.size() > 1 ? ".chunk" + std::to_string(chunk) : "");
  }

  void Recv(int m, int chunk, const std::vector<TensorId>& tensors, const std::string& what) {
    if (tensors.empty()) return;
    Node recv;
    recv.name = Prefix(m) + "pp_recv_" + what + Where(chunk);
    recv.op = "pp_recv";
    recv.phase = Phase::kBackward;
    recv.flops = 0;
    recv.inputs = std::move(in_flight_);
    in_flight_.clear();
    for (TensorId t : tensors) {
      map_[m][t] = Add(Prefix(m) + in_.tensors[t].name + ".recv", in_.tensors[t].bytes,
                       TensorKind::kActivation, kNoId);
      recv.outputs.push_back(map_[m][t]);
    }
    out_.nodes.push_back(std::move(recv));
  }

  // A pp_send node reading what it sends; a send is complete at the
  // stage's next receive, or at once when no receive follows.
  void Send(int m, int chunk, const std::vector<TensorId>& tensors, Phase phase,
            const std::string& what) {
    if (tensors.empty()) return;
    Node send;
    send.name = Prefix(m) + "pp_send_" + what + Where(chunk);
    send.op = "pp_send";
    send.phase = phase;
    send.flops = 0;
    for (TensorId t : tensors) send.inputs.push_back(map_[m][t]);
    in_flight_.insert(in_flight_.end(), send.inputs.begin(), send.inputs.end());
    out_.nodes.push_back(std::move(send));
  }

  // Without --pp-free-outputs the schedule holds the sent activations until
  // this microbatch's backward has run (the backward call takes them): a
  // pp_release node reads them last.
  void Release(int m, int chunk) {
    if (layout_.pp_free_outputs || send_[chunk].empty()) return;
    Node release;
    release.name = Prefix(m) + "pp_release" + Where(chunk);
    release.op = "pp_release";
    release.phase = Phase::kBackward;
    release.flops = 0;
    for (TensorId t : send_[chunk]) release.inputs.push_back(map_[m][t]);
    out_.nodes.push_back(std::move(release));
  }

  void Forward(int m, int c) {
    Recv(m, c, recv_[c], "activations");
    for (NodeId n : forward_[c]) Copy(m, n);
    Send(m, c, send_[c], Phase::kForward, "activations");
  }

  void Backward(int m, int c) {
    Recv(m, c, recv_grad_[c], "gradients");
    for (NodeId n : backward_[c]) {
      Copy(m, n);
      Accumulate(m, n);
    }
    Send(m, c, send_grad_[c], Phase::kBackward, "gradients");
    Release(m, c);
  }

  // The optimizer state a stage holds: the state of its parameters, by
  // name ("<parameter>.<state>": exp_avg, exp_avg_sq, step, as
  // scripts/export_torch.py and ONNX Runtime name them); state naming no
  // parameter is held by every stage.
  bool StateHere(TensorId t) const {
    const std::string& name = in_.tensors[t].name;
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) return true;
    auto owner = param_by_name_.find(name.substr(0, dot));
    return owner == param_by_name_.end() || shared_[owner->second] != kNoId;
  }

  // The stage's part of the optimizer: each optimizer node that reads the
  // stage's gradients, parameters or state, or what such a node made, with
  // those inputs (torch.optim steps each parameter on its own, so a stage
  // runs the same nodes, temporaries included, for its parameters).
  void Optimizer() {
    for (TensorId t = 0; t < in_.tensors.size(); ++t) {
      if (in_.tensors[t].kind == TensorKind::kParameter && in_.tensors[t].alias_of == kNoId) {
        param_by_name_.emplace(in_.tensors[t].name, t);
      }
    }
    std::vector<TensorId> made(in_.tensors.size(), kNoId);
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      if (node.phase != Phase::kOptimizer) continue;
      Node part = node;
      part.inputs.clear();
      part.outputs.clear();
      for (TensorId t : node.inputs) {
        const Tensor& tensor = in_.tensors[t];
        TensorId mapped = made[t];
        if (mapped != kNoId) {
        } else if (tensor.kind == TensorKind::kGradient || (tensor.alias_of != kNoId &&
                       in_.tensors[in_.StorageRoot(t)].kind == TensorKind::kGradient)) {
          auto grad = grad_root_.find(in_.StorageRoot(t));
          if (grad != grad_root_.end()) mapped = grad->second;
        } else if (tensor.producer == kNoId && tensor.kind == TensorKind::kOptimizerState) {
          if (StateHere(in_.StorageRoot(t))) mapped = Get(0, t);
        } else if (tensor.producer == kNoId && SharedKind(tensor.kind)) {
          mapped = shared_[t];
        }
        if (mapped != kNoId &&
            std::find(part.inputs.begin(), part.inputs.end(), mapped) == part.inputs.end()) {
          part.inputs.push_back(mapped);
        }
      }
      // A node reading none of the stage's tensors is another stage's, except
      // one that reads nothing at all (a constant every stage makes).
      if (part.inputs.empty() && !node.inputs.empty()) continue;
      for (TensorId t : node.outputs) {
        const Tensor& tensor = in_.tensors[t];
        TensorId alias = kNoId;
        if (tensor.alias_of != kNoId) {
          const TensorId target = made[tensor.alias_of] != kNoId ? made[tensor.alias_of]
                                  : shared_[tensor.alias_of] != kNoId ? shared_[tensor.alias_of]
                                                                      : kNoId;
          auto grad = grad_root_.find(in_.StorageRoot(tensor.alias_of));
          alias = target != kNoId ? target
                  : grad != grad_root_.end() ? grad->second
                                             : kNoId;
        }
        // An in-place result on another stage's tensor: nothing of this stage's.
        const int64_t bytes = tensor.alias_of != kNoId ? 0 : tensor.bytes;
        made[t] = Add(tensor.name, bytes, tensor.kind, alias);
        part.outputs.push_back(made[t]);
      }
      out_.nodes.push_back(std::move(part));
    }
  }

  void Scale() {
    int64_t all = 0, here = 0;
    for (TensorId t = 0; t < in_.tensors.size(); ++t) {
      if (in_.tensors[t].kind != TensorKind::kParameter || in_.tensors[t].alias_of != kNoId) {
        continue;
      }
      all += in_.tensors[t].bytes;
      if (shared_[t] != kNoId) here += in_.tensors[t].bytes;
    }
    out_.training = in_.training;
    if (all == 0) return;
    auto part = [&](int64_t bytes) {
      return static_cast<int64_t>((static_cast<__int128>(bytes) * here + all - 1) / all);
    };
    TrainingState& t = out_.training;
    t.parameter_count = part(t.parameter_count);
    t.extra_parameter_bytes = part(t.extra_parameter_bytes);
    t.extra_buffer_bytes = part(t.extra_buffer_bytes);
    t.extra_optimizer_bytes = part(t.extra_optimizer_bytes);
    t.implicit_gradient_bytes = part(t.implicit_gradient_bytes);
  }

  const Graph& in_;
  const ParallelLayout& layout_;
  const int stage_;
  const std::vector<int>& stage_of_;
  Graph out_;
  // Per chunk (one unless interleaved): its nodes, what it receives and sends.
  std::vector<std::vector<NodeId>> forward_, backward_;
  std::vector<std::vector<TensorId>> recv_, recv_grad_, send_, send_grad_;
  std::vector<TensorId> in_flight_;  // stage tensors of sends not yet complete
  std::vector<std::vector<TensorId>> map_;  // per microbatch: original -> stage tensor
  std::vector<TensorId> shared_;            // state tensors, one copy for all microbatches
  std::map<TensorId, TensorId> grad_root_;  // original gradient root -> stage's
  std::map<std::string, TensorId> param_by_name_;  // parameter roots, for StateHere
  std::map<TensorId, NodeId> last_gradient_use_;  // gradient root -> last backward node
  std::vector<std::pair<TensorId, TensorId>> fresh_;  // (gradient root, fresh tensor)
};

// A backward node without a layer scope (exported graphs give backward
// nodes no scope) runs where what it reads was made: the last stage of the
// forward tensors it reads; else of the parameters and graph inputs it reads
// (their first forward reader's stage); -1 when it reads none of these.
int BackwardEvidence(const Graph& graph, NodeId n, const std::vector<int>& stage_of,
                     const std::vector<int>& resident_stage) {
  int forward = -1, resident = -1;
  for (TensorId t : graph.nodes[n].inputs) {
    const TensorId root = graph.StorageRoot(t);
    const NodeId p = graph.tensors[t].producer;
    if (p != kNoId && graph.nodes[p].phase == Phase::kForward) {
      forward = std::max(forward, stage_of[p]);
    } else if (resident_stage[root] >= 0) {
      resident = std::max(resident, resident_stage[root]);
    }
  }
  return forward >= 0 ? forward : resident;
}

// Backward nodes placed by inheritance only move down to a lower stage when
// what they read is there already (its storage made on or received by that
// stage), so that the gradient a stage receives is the one it needs, not
// what a stage above derived from it (e.g. the reshapes and sums of the
// received gradient that the receiving stage's weight and bias gradients
// read). A node whose outputs other stages' nodes read moves to the highest
// of those stages when all are below it; a terminal node (its outputs read
// by none but the optimizer and other terminal nodes: a parameter's
// gradient and the views and sums making it) to the lowest stage where
// its inputs are. Repeats until nothing moves.
void PullDown(const Graph& graph, const std::vector<uint8_t>& inherited,
              std::vector<int>* stage_of) {
  std::vector<int>& stage = *stage_of;
  // Per tensor, the nodes reading it; per storage, those reading any view.
  std::vector<std::vector<NodeId>> readers(graph.tensors.size()), storage_readers(readers);
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    for (TensorId t : graph.nodes[n].inputs) {
      readers[t].push_back(n);
      storage_readers[graph.StorageRoot(t)].push_back(n);
    }
  }
  std::vector<uint8_t> terminal(graph.nodes.size(), 0);
  for (NodeId n = static_cast<NodeId>(graph.nodes.size()); n-- > 0;) {
    if (!inherited[n]) continue;
    bool only_terminal = true;
    for (TensorId out : graph.nodes[n].outputs) {
      for (NodeId r : readers[out]) {
        only_terminal = only_terminal && (r == n || stage[r] < 0 || terminal[r]);
      }
    }
    terminal[n] = only_terminal;
  }
  // Whether storage `root` is made on or read by a node of stage `s`.
  auto available = [&](TensorId root, int s) {
    const NodeId p = graph.tensors[root].producer;
    if (p == kNoId || stage[p] == s) return true;
    for (NodeId r : storage_readers[root]) {
      if (stage[r] == s) return true;
    }
    return false;
  };
  auto ready = [&](NodeId n, int s) {
    for (TensorId t : graph.nodes[n].inputs) {
      if (!available(graph.StorageRoot(t), s)) return false;
    }
    return true;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (NodeId n = static_cast<NodeId>(graph.nodes.size()); n-- > 0;) {
      if (!inherited[n]) continue;
      const int here = stage[n];
      int target = -1;
      if (terminal[n]) {
        for (int s = 0; s < here && target < 0; ++s) {
          if (ready(n, s)) target = s;
        }
      } else {
        bool lower = true;
        for (TensorId out : graph.nodes[n].outputs) {
          for (NodeId r : readers[out]) {
            if (r == n || stage[r] < 0 || terminal[r]) continue;
            lower = lower && stage[r] < here;
            target = std::max(target, stage[r]);
          }
        }
        if (!lower || (target >= 0 && !ready(n, target))) target = -1;
      }
      if (target < 0) continue;
      stage[n] = target;
      moved = true;
    }
  }
}

}  // namespace

std::vector<int> AssignStages(const Graph& graph, int stages) {
  std::vector<int> layer_of(graph.nodes.size(), -1);
  std::set<int> layers;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    layer_of[n] = LayerIndex(ModuleUnit(graph.nodes[n].scope));
    if (layer_of[n] >= 0) layers.insert(layer_of[n]);
  }
  if (static_cast<int>(layers.size()) < stages) {
    // Counted as virtual stages (pp x virtual stages); the library names no flag.
    const std::string n = std::to_string(stages);
    throw InputError(graph.source + ": " + n +
                         (stages == 1 ? " pipeline stage needs at least 1 layer"
                                      : " pipeline stages need at least " + n + " layers") +
                         " (module scopes such as h.0, h.1), and the graph has " +
                         std::to_string(layers.size()),
                     kExitUsage);
  }
  // Layer indices in order -> stage: even split, earlier stages one more.
  std::map<int, int> stage_of_layer;
  const int count = static_cast<int>(layers.size());
  int index = 0;
  for (int layer : layers) {
    int stage = 0, begin = 0;
    for (; stage < stages; ++stage) {
      const int size = count / stages + (stage < count % stages ? 1 : 0);
      if (index < begin + size) break;
      begin += size;
    }
    stage_of_layer[layer] = stage;
    ++index;
  }
  std::vector<int> stage_of(graph.nodes.size(), stages - 1);
  std::vector<int> resident_stage(graph.tensors.size(), -1);  // first forward reader's
  std::vector<uint8_t> inherited(graph.nodes.size(), 0);
  bool seen_layer = false;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase == Phase::kOptimizer) {
      stage_of[n] = -1;
    } else if (layer_of[n] >= 0) {
      stage_of[n] = stage_of_layer[layer_of[n]];
      seen_layer = seen_layer || node.phase == Phase::kForward;
    } else if (node.phase == Phase::kForward) {
      // Before the first layer: embeddings; after: final norm, head, loss.
      stage_of[n] = seen_layer ? stages - 1 : 0;
    } else {
      stage_of[n] = BackwardEvidence(graph, n, stage_of, resident_stage);
      if (stage_of[n] < 0) {
        // Else the lowest stage of the nodes that made its inputs (gradients
        // flow down the stages: it can run no higher), else the last
        // stage, where the backward starts.
        inherited[n] = 1;
        stage_of[n] = stages - 1;
        for (TensorId t : node.inputs) {
          const NodeId p = graph.tensors[t].producer;
          if (p != kNoId && stage_of[p] >= 0) stage_of[n] = std::min(stage_of[n], stage_of[p]);
        }
      }
    }
    if (node.phase != Phase::kForward) continue;
    for (TensorId t : node.inputs) {
      const TensorId root = graph.StorageRoot(t);
      const TensorKind kind = graph.tensors[root].kind;
      if ((kind == TensorKind::kParameter || kind == TensorKind::kInput) &&
          graph.tensors[root].producer == kNoId && resident_stage[root] < 0) {
        resident_stage[root] = stage_of[n];
      }
    }
  }
  PullDown(graph, inherited, &stage_of);
  return stage_of;
}

std::vector<ScheduleSlot> StageSchedule(const std::string& schedule, int stages, int stage,
                                        int microbatches, int chunks) {
  std::vector<ScheduleSlot> slots;
  if (schedule == "gpipe") {
    for (int m = 0; m < microbatches; ++m) slots.push_back({true, m, 0});
    for (int m = 0; m < microbatches; ++m) slots.push_back({false, m, 0});
    return slots;
  }
  if (schedule != "interleaved") chunks = 1;
  // The k-th forward (backward) runs microbatch (k / (p V)) p + k % p of
  // chunk (k / p) % V (backward: V - 1 minus that), as Megatron's
  // get_model_chunk_id; with V = 1 this is plain 1F1B.
  const int total = microbatches * chunks;
  auto slot = [&](bool forward, int k) {
    const int group = k / (stages * chunks);
    const int chunk = (k / stages) % chunks;
    return ScheduleSlot{forward, group * stages + k % stages,
                        forward ? chunk : chunks - 1 - chunk};
  };
  const int warmup =
      schedule == "interleaved"
          ? std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
          : std::min(stages - stage - 1, total);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) slots.push_back(slot(true, forward));
  while (forward < total) {
    slots.push_back(slot(true, forward++));
    slots.push_back(slot(false, backward++));
  }
  while (backward < total) slots.push_back(slot(false, backward++));
  return slots;
}

Graph StageGraph(const Graph& graph, const ParallelLayout& layout, int stage,
                 const std::vector<int>& stage_of_node) {
  return StageBuilder(graph, layout, stage, stage_of_node).Build();
}

int PlanningMicrobatches(const ParallelLayout& layout, int stage) {
  if (layout.schedule != "1f1b") return layout.microbatches;
  const int warmup = std::min(layout.pp - stage - 1, layout.microbatches);
  return std::min(layout.microbatches, warmup + 3);
}

namespace {

// "mb<k>.<rest>" -> (k, rest); (-1, name) without the prefix.
std::pair<int, std::string> SplitMicrobatch(const std::string& name) {
  if (name.compare(0, 2, "mb") != 0) return {-1, name};
  size_t i = 2;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 2 || i >= name.size() || name[i] != '.') return {-1, name};
  return {std::stoi(name.substr(2, i - 2)), name.substr(i + 1)};
}

}  // namespace

SaveSet UniformPlan(const Graph& small, const SaveSet& keep, const Graph& full) {
  // Per name without the prefix: whether every copy in `small` is saved.
  std::map<std::string, bool> saved;
  for (TensorId t = 0; t < small.tensors.size(); ++t) {
    const bool kept = t >= keep.size() || keep[t] != 0;
    auto [it, inserted] = saved.emplace(SplitMicrobatch(small.tensors[t].name).second, kept);
    if (!inserted) it->second = it->second && kept;
  }
  SaveSet out = SaveAll(full);
  out.resize(full.tensors.size(), 1);
  for (TensorId t = 0; t < full.tensors.size(); ++t) {
    auto found = saved.find(SplitMicrobatch(full.tensors[t].name).second);
    if (found != saved.end() && !found->second) out[t] = 0;
  }
  return out;
}

}  // namespace ckptplan
