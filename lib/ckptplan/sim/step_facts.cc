#include "ckptplan/sim/step_facts.h"

namespace ckptplan {

std::vector<NodeId> LastForwardReads(const SimContext& context) {
  const size_t num_tensors = context.graph.tensors.size();
  std::vector<NodeId> last(num_tensors, 0);
  for (TensorId t = 0; t < num_tensors; ++t) {
    if (!context.forward_produced[t]) continue;
    NodeId& at = last[context.root[t]];
    at = std::max(at, context.producer[t]);
  }
  for (NodeId n = 0; n < context.graph.nodes.size(); ++n) {
    if (!context.node_forward[n]) continue;
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      NodeId& at = last[context.root[context.ids[i]]];
      at = std::max(at, n);
    }
  }
  return last;
}

StepFacts::StepFacts(const SimContext& context) : context_(context) {
  const size_t num_tensors = context.graph.tensors.size();
  original_.assign(num_tensors, kNone);
  copy_.assign(num_tensors, kNone);
  first_read_.assign(num_tensors, kNone);
  last_read_.assign(num_tensors, kNone);
  last_own_read_.assign(num_tensors, kNone);
  alias_last_read_.assign(num_tensors, kNone);
  alias_first_made_.assign(num_tensors, kNone);
  recompute_read_.assign(num_tensors, 0);
  odd_root_.assign(num_tensors, 0);
  family_last_.assign(num_tensors, kNone);
  family_second_.assign(num_tensors, kNone);
  family_last_tensor_.assign(num_tensors, kNoId);
}

void StepFacts::Fill(const SimResult& sim, NodeId first, NodeId end) {
  for (TensorId t : stored_) original_[t] = copy_[t] = kNone;
  stored_.clear();
  for (TensorId t : read_) {
    first_read_[t] = last_read_[t] = last_own_read_[t] = kNone;
    alias_last_read_[t] = alias_first_made_[t] = kNone;
    recompute_read_[t] = odd_root_[t] = 0;
  }
  read_.clear();
  for (TensorId root : family_roots_) {
    family_last_[root] = family_second_[root] = kNone;
    family_last_tensor_[root] = kNoId;
  }
  family_roots_.clear();
  reads_ready_ = saved_ready_ = false;
  sim_ = &sim;
  first_ = first;
  end_ = end;
  const size_t num_steps = sim.steps.size();
  const size_t num_nodes = end - first;
  own_step_.assign(num_nodes, kNone);
  group_begin_.assign(num_nodes, kNone);
  rerun_step_.assign(num_nodes, kNone);
  ReserveSteps(group_, num_steps);
  group_.resize(num_steps);
  // Recompute steps belong to the group of the node that follows them.
  uint32_t begin = 0;
  for (uint32_t s = 0; s < num_steps; ++s) {
    const Step& step = sim.steps[s];
    if (step.recompute) {
      rerun_step_[step.node - first] = s;
      continue;
    }
    own_step_[step.node - first] = s;
    group_begin_[step.node - first] = begin;
    for (uint32_t i = begin; i <= s; ++i) group_[i] = step.node;
    begin = s + 1;
  }
  for (uint32_t b = 0; b < sim.buffers.size(); ++b) {
    const Buffer& buffer = sim.buffers[b];
    (sim.steps[buffer.first_step].recompute ? copy_ : original_)[buffer.root] = b;
    stored_.push_back(buffer.root);
  }
}

void StepFacts::FillReads() {
  reads_ready_ = true;
  const SimResult& sim = *sim_;
  const TensorId* ids = context_.ids.data();
  for (uint32_t s = 0; s < sim.steps.size(); ++s) {
    const Step& step = sim.steps[s];
    if (!step.recompute && context_.node_forward[step.node]) continue;
    for (uint32_t i = context_.inputs_begin[step.node]; i < context_.outputs_begin[step.node];
         ++i) {
      const TensorId x = ids[i];
      if (first_read_[x] == kNone) {
        first_read_[x] = s;
        read_.push_back(x);
      }
      last_read_[x] = s;
      if (step.recompute) {
        recompute_read_[x] = 1;
      } else {
        last_own_read_[x] = s;
      }
      if (!context_.forward_produced[x] && !context_.resident_root[x]) AliasRead(x, s);
    }
  }
}

// A non-forward read of `x`, which no forward node made: a view a backward
// node took of a forward tensor reads the storage that tensor had when the
// view was made (its original when saved, else its copy), so the read counts
// as one of the nearest forward-made tensor it views. Anything else marks
// its root odd.
void StepFacts::AliasRead(TensorId x, uint32_t step) {
  TensorId base = x;
  while (base != kNoId && !context_.forward_produced[base]) base = context_.alias_of[base];
  if (base == kNoId) {
    const TensorId root = context_.root[x];
    if (!odd_root_[root]) {
      odd_root_[root] = 1;
      read_.push_back(root);
    }
    return;
  }
  const NodeId maker = context_.producer[x];
  const uint32_t made = maker >= first_ && maker < end_ ? own_step_[maker - first_] : 0;
  if (alias_last_read_[base] == kNone) {
    read_.push_back(base);
    alias_first_made_[base] = made;
  }
  alias_last_read_[base] = step;
  alias_first_made_[base] = std::min(alias_first_made_[base], made);
}

void StepFacts::FillSaved(const SaveSet& keep) {
  saved_ready_ = true;
  if (last_forward_read_.empty()) last_forward_read_ = LastForwardReads(context_);
  // Each saved candidate read once over, whether listed once or twice.
  for (TensorId x : read_) {
    if (!context_.is_candidate[x] || !keep[x]) continue;
    const uint32_t last = LastUse(x);
    if (last == kNone) continue;
    const TensorId root = context_.root[x];
    uint32_t& top = family_last_[root];
    if (family_last_tensor_[root] == x) continue;  // listed twice
    if (top == kNone) family_roots_.push_back(root);
    if (top == kNone || last > top) {
      family_second_[root] = top;
      top = last;
      family_last_tensor_[root] = x;
    } else if (family_second_[root] == kNone || last > family_second_[root]) {
      family_second_[root] = last;
    }
  }
}

}  // namespace ckptplan
