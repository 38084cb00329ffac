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

int64_t StorageBytes(const Graph& graph, TensorId t) {
  return graph.tensors[graph.StorageRoot(t)].bytes;
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
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      if (stage_of_[n] != stage_) continue;
      (in_.nodes[n].phase == Phase::kForward ? forward_ : backward_).push_back(n);
    }
    FindBoundaries();
  }

  Graph Build() {
    map_.assign(layout_.microbatches, std::vector<TensorId>(in_.tensors.size(), kNoId));
    for (const ScheduleSlot& slot :
         StageSchedule(layout_.schedule, layout_.pp, stage_, layout_.microbatches)) {
      slot.forward ? Forward(slot.microbatch) : Backward(slot.microbatch);
    }
    Optimizer();
    Scale();
    out_.Finalize();
    return std::move(out_);
  }

 private:
  bool Here(NodeId n) const { return n != kNoId && stage_of_[n] == stage_; }
  bool ForwardMade(TensorId t) const {
    const NodeId p = in_.tensors[t].producer;
    return p != kNoId && in_.nodes[p].phase == Phase::kForward;
  }

  // What crosses the stage's edges, in tensor id order.
  void FindBoundaries() {
    std::set<TensorId> recv, recv_grad, send, send_grad;
    auto reads = [&](NodeId n, bool forward) {
      for (TensorId t : in_.nodes[n].inputs) {
        const NodeId p = in_.tensors[t].producer;
        // A parameter gradient made elsewhere (a tied weight) is not sent:
        // each stage accumulates its own copy.
        if (p == kNoId || Here(p) || in_.tensors[t].kind == TensorKind::kGradient) continue;
        if (ForwardMade(t)) {
          recv.insert(t);
        } else if (!forward) {
          recv_grad.insert(t);
        }
      }
    };
    for (NodeId n : forward_) reads(n, true);
    for (NodeId n : backward_) reads(n, false);
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      if (Here(n) || stage_of_[n] < 0) continue;
      for (TensorId t : in_.nodes[n].inputs) {
        const NodeId p = in_.tensors[t].producer;
        if (!Here(p) || in_.tensors[t].kind == TensorKind::kGradient) continue;
        (ForwardMade(t) ? send : send_grad).insert(t);
      }
    }
    recv_.assign(recv.begin(), recv.end());
    recv_grad_.assign(recv_grad.begin(), recv_grad.end());
    send_.assign(send.begin(), send.end());
    send_grad_.assign(send_grad.begin(), send_grad.end());
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
  // makes its storage; later ones (microbatches, tied uses) accumulate into
  // it in place.
  TensorId GradientOutput(int m, TensorId t, std::vector<TensorId>* inputs) {
    const TensorId root = in_.StorageRoot(t);
    auto found = grad_root_.find(root);
    if (found == grad_root_.end()) {
      const TensorId made = Add(in_.tensors[root].name, in_.tensors[root].bytes,
                                TensorKind::kGradient, kNoId);
      grad_root_.emplace(root, made);
      map_[m][t] = made;
      return made;
    }
    if (std::find(inputs->begin(), inputs->end(), found->second) == inputs->end()) {
      inputs->push_back(found->second);
    }
    const TensorId alias =
        Add(Prefix(m) + in_.tensors[t].name + ".acc" + std::to_string(accumulations_++), 0,
            TensorKind::kGradient, found->second);
    map_[m][t] = alias;
    return alias;
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
      // Reading a gradient is reading the stage's storage of it, if made.
      auto found = grad_root_.find(in_.StorageRoot(t));
      if (found != grad_root_.end() &&
          std::find(copy.inputs.begin(), copy.inputs.end(), found->second) == copy.inputs.end()) {
        copy.inputs.push_back(found->second);
      }
    }
    for (TensorId t : node.outputs) {
      const Tensor& tensor = in_.tensors[t];
      if (tensor.kind == TensorKind::kGradient) {
        copy.outputs.push_back(GradientOutput(m, t, &copy.inputs));
        continue;
      }
      TensorId alias = kNoId;
      if (tensor.alias_of != kNoId && in_.tensors[tensor.alias_of].kind == TensorKind::kGradient) {
        alias = grad_root_.at(in_.StorageRoot(tensor.alias_of));  // a view of a gradient
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
  void Recv(int m, const std::vector<TensorId>& tensors, const std::vector<TensorId>& reads,
            const std::string& what) {
    if (tensors.empty() && reads.empty()) return;
    Node recv;
    recv.name = Prefix(m) + "pp_recv_" + what + ".stage" + std::to_string(stage_);
    recv.op = "pp_recv";
    recv.phase = Phase::kBackward;
    recv.flops = 0;
    for (TensorId t : reads) recv.inputs.push_back(map_[m][t]);
    for (TensorId t : tensors) {
      map_[m][t] = Add(Prefix(m) + in_.tensors[t].name + ".recv", StorageBytes(in_, t),
                       TensorKind::kActivation, kNoId);
      recv.outputs.push_back(map_[m][t]);
    }
    out_.nodes.push_back(std::move(recv));
  }

  void Send(int m, const std::vector<TensorId>& tensors, Phase phase, const std::string& what) {
    if (tensors.empty()) return;
    Node send;
    send.name = Prefix(m) + "pp_send_" + what + ".stage" + std::to_string(stage_);
    send.op = "pp_send";
    send.phase = phase;
    send.flops = 0;
    for (TensorId t : tensors) send.inputs.push_back(map_[m][t]);
    out_.nodes.push_back(std::move(send));
  }

  void Forward(int m) {
    Recv(m, recv_, {}, "activations");
    for (NodeId n : forward_) Copy(m, n);
    Send(m, send_, Phase::kForward, "activations");
  }

  void Backward(int m) {
    Recv(m, recv_grad_, {}, "gradients");
    for (NodeId n : backward_) Copy(m, n);
    Send(m, send_grad_, Phase::kBackward, "gradients");
    // The schedule holds the sent activations until this microbatch's
    // backward has run (the backward call takes them), unless the stage
    // freed them once sent.
    if (!layout_.pp_free_outputs) Send(m, send_, Phase::kBackward, "release");
  }

  // The stage's part of each optimizer node: its own parameters and
  // gradients.
  void Optimizer() {
    for (NodeId n = 0; n < in_.nodes.size(); ++n) {
      const Node& node = in_.nodes[n];
      if (node.phase != Phase::kOptimizer) continue;
      Node part = node;
      part.inputs.clear();
      part.outputs.clear();
      for (TensorId t : node.inputs) {
        auto grad = grad_root_.find(in_.StorageRoot(t));
        if (grad != grad_root_.end()) {
          part.inputs.push_back(grad->second);
        } else if (shared_[t] != kNoId) {
          part.inputs.push_back(shared_[t]);
        }
      }
      if (!part.inputs.empty()) out_.nodes.push_back(std::move(part));
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
  std::vector<NodeId> forward_, backward_;
  std::vector<TensorId> recv_, recv_grad_, send_, send_grad_;
  std::vector<std::vector<TensorId>> map_;  // per microbatch: original -> stage tensor
  std::vector<TensorId> shared_;            // state tensors, one copy for all microbatches
  std::map<TensorId, TensorId> grad_root_;  // original gradient root -> stage's
  int accumulations_ = 0;
};

// A backward node without a layer scope (exported graphs give backward
// nodes no scope) runs where what it reads was made: the last stage of the
// forward tensors it reads; else of the parameters it reads (their first
// forward reader's stage); else of the backward node that made its first
// gradient input; else the last stage, where the backward starts.
int BackwardStage(const Graph& graph, NodeId n, const std::vector<int>& stage_of,
                  const std::vector<int>& param_stage, int stages) {
  int forward = -1, param = -1, inherited = -1;
  for (TensorId t : graph.nodes[n].inputs) {
    const TensorId root = graph.StorageRoot(t);
    const NodeId p = graph.tensors[t].producer;
    if (p != kNoId && graph.nodes[p].phase == Phase::kForward) {
      forward = std::max(forward, stage_of[p]);
    } else if (param_stage[root] >= 0) {
      param = std::max(param, param_stage[root]);
    } else if (p != kNoId && inherited < 0 && stage_of[p] >= 0) {
      inherited = stage_of[p];
    }
  }
  return forward >= 0 ? forward : param >= 0 ? param : inherited >= 0 ? inherited : stages - 1;
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
    throw InputError(graph.source + ": --pp " + std::to_string(stages) + " needs at least " +
                         std::to_string(stages) + " layers (module scopes such as h.0, h.1), "
                         "and the graph has " + std::to_string(layers.size()),
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
  std::vector<int> param_stage(graph.tensors.size(), -1);  // first forward reader's
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
      stage_of[n] = BackwardStage(graph, n, stage_of, param_stage, stages);
    }
    if (node.phase != Phase::kForward) continue;
    for (TensorId t : node.inputs) {
      const TensorId root = graph.StorageRoot(t);
      if (graph.tensors[root].kind == TensorKind::kParameter && param_stage[root] < 0) {
        param_stage[root] = stage_of[n];
      }
    }
  }
  return stage_of;
}

std::vector<ScheduleSlot> StageSchedule(const std::string& schedule, int stages, int stage,
                                        int microbatches) {
  std::vector<ScheduleSlot> slots;
  if (schedule == "gpipe") {
    for (int m = 0; m < microbatches; ++m) slots.push_back({true, m});
    for (int m = 0; m < microbatches; ++m) slots.push_back({false, m});
    return slots;
  }
  const int warmup = std::min(stages - stage - 1, microbatches);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) slots.push_back({true, forward});
  while (forward < microbatches) {
    slots.push_back({true, forward++});
    slots.push_back({false, backward++});
  }
  while (backward < microbatches) slots.push_back({false, backward++});
  return slots;
}

Graph StageGraph(const Graph& graph, const ParallelLayout& layout, int stage,
                 const std::vector<int>& stage_of_node) {
  return StageBuilder(graph, layout, stage, stage_of_node).Build();
}

}  // namespace ckptplan
