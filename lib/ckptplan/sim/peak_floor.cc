#include "ckptplan/sim/peak_floor.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

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
  // Per tensor, whether non-forward nodes read it at or before `node`, at or
  // after it: a byte a tensor, as the per-tensor arrays' first touches of
  // fresh pages are most of the floor's cost on large graphs.
  constexpr uint8_t kAtOrBefore = 1, kAtOrAfter = 2;
  std::vector<uint8_t> reads(num_tensors, 0);
  for (NodeId n = 0; n < context.graph.nodes.size(); ++n) {
    if (context.node_forward[n]) continue;
    const uint8_t when = (n <= node ? kAtOrBefore : 0) | (n >= node ? kAtOrAfter : 0);
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      reads[context.ids[i]] |= when;
    }
  }
  // The candidates read at or after `node`, by root; the roots whose copy
  // is live there when dropped.
  std::vector<std::pair<TensorId, TensorId>> read_after;  // (root, candidate)
  for (TensorId t : context.candidates) {
    if (reads[t] & kAtOrAfter) read_after.emplace_back(context.root[t], t);
    if (context.made[t] == SimContext::Made::kActivation && context.root[t] == t &&
        reads[t] == (kAtOrBefore | kAtOrAfter)) {
      copies_.emplace_back(t, context.bytes[t]);
    }
  }
  std::sort(read_after.begin(), read_after.end());
  const std::vector<NodeId> last_forward = LastForwardReads(context);
  for (const Buffer& buffer : save_all.buffers) {
    if (buffer.first_step > step || buffer.last_step < step) continue;
    const TensorId root = context.root[buffer.root];
    if (!context.forward_produced[root] || last_forward[root] >= node) continue;
    const uint32_t first = static_cast<uint32_t>(readers_.size());
    for (auto it = std::lower_bound(read_after.begin(), read_after.end(),
                                    std::make_pair(root, TensorId{0}));
         it != read_after.end() && it->first == root; ++it) {
      readers_.push_back(it->second);
    }
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
