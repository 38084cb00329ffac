#include "ckptplan/sim/peak_floor.h"

#include <algorithm>
#include <limits>

#include "ckptplan/sim/step_facts.h"

namespace ckptplan {

PeakFloor::PeakFloor(const SimContext& context, const SimResult& save_all) {
  if (save_all.steps.empty()) {
    total_ = std::numeric_limits<int64_t>::min();
    return;
  }
  const uint32_t step = save_all.peak_step;
  total_ = save_all.total[step];
  const NodeId node = save_all.steps[step].node;
  const size_t num_tensors = context.graph.tensors.size();
  // Per tensor, the first and last non-forward node reading it (kNoId: none).
  std::vector<NodeId> first_read(num_tensors, kNoId), last_read(num_tensors, kNoId);
  for (NodeId n = 0; n < context.graph.nodes.size(); ++n) {
    if (context.node_forward[n]) continue;
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      const TensorId t = context.ids[i];
      if (first_read[t] == kNoId) first_read[t] = n;
      last_read[t] = n;
    }
  }
  for (TensorId t : context.candidates) {
    if (context.made[t] == SimContext::Made::kActivation && context.root[t] == t &&
        first_read[t] != kNoId && first_read[t] <= node && last_read[t] >= node) {
      copies_.emplace_back(t, context.bytes[t]);
    }
  }
  // Candidates per root that a non-forward node at or after `node` reads.
  std::vector<std::vector<TensorId>> read_after(num_tensors);
  for (TensorId t : context.candidates) {
    if (last_read[t] != kNoId && last_read[t] >= node) read_after[context.root[t]].push_back(t);
  }
  const std::vector<NodeId> last_forward = LastForwardReads(context);
  for (const Buffer& buffer : save_all.buffers) {
    if (buffer.first_step > step || buffer.last_step < step) continue;
    const TensorId root = context.root[buffer.root];
    if (!context.forward_produced[root] || last_forward[root] >= node) continue;
    const uint32_t first = static_cast<uint32_t>(readers_.size());
    readers_.insert(readers_.end(), read_after[root].begin(), read_after[root].end());
    roots_.push_back({context.bytes[root], first, static_cast<uint32_t>(readers_.size())});
  }
}

int64_t PeakFloor::Of(const SaveSet& keep) const {
  int64_t floor = total_;
  for (const Root& root : roots_) {
    bool kept = false;
    for (uint32_t i = root.first; i < root.end && !kept; ++i) kept = keep[readers_[i]] != 0;
    if (!kept) floor -= root.bytes;
  }
  for (const auto& [t, bytes] : copies_) {
    if (!keep[t]) floor += bytes;
  }
  return floor;
}

}  // namespace ckptplan
