#include "ckptplan/emit/copy_lanes.h"

#include <algorithm>

namespace ckptplan {
namespace {

// The simulation's timed steps: original nodes run as themselves.
struct TimedStep {
  uint32_t step;
  double start_us, end_us;
};

std::vector<TimedStep> TimedSteps(const SimResult& sim, const OffloadedGraph& offloaded) {
  std::vector<TimedStep> timed;
  for (uint32_t s = 0; s < sim.steps.size(); ++s) {
    if (sim.steps[s].recompute) continue;
    const NodeId original = offloaded.original_node[sim.steps[s].node];
    if (original == kNoId || original >= offloaded.node_start_us.size()) continue;
    timed.push_back({s, offloaded.node_start_us[original], offloaded.node_end_us[original]});
  }
  return timed;
}

// Step coordinate of time `us`: in the first timed step that ends after it.
double StepAt(const std::vector<TimedStep>& timed, double us, uint32_t num_steps) {
  auto it = std::upper_bound(timed.begin(), timed.end(), us,
                             [](double t, const TimedStep& step) { return t < step.end_us; });
  if (it == timed.end()) return num_steps;
  if (us <= it->start_us) return it->step;  // waiting for it, or at its start
  return it->step + (us - it->start_us) / (it->end_us - it->start_us);
}

}  // namespace

std::vector<CopySlice> CopySlices(const SimResult& sim, const OffloadedGraph& offloaded) {
  std::vector<CopySlice> slices;
  if (offloaded.copies.empty()) return slices;
  const std::vector<TimedStep> timed = TimedSteps(sim, offloaded);
  const uint32_t num_steps = static_cast<uint32_t>(sim.steps.size());
  for (bool to_host : {true, false}) {
    for (const OffloadCopy& copy : offloaded.copies) {
      CopySlice slice;
      slice.to_host = to_host;
      slice.tensor = copy.tensor;
      slice.bytes = copy.bytes;
      slice.host_bytes = copy.host_bytes;
      slice.start_us = to_host ? copy.out_start_us : copy.in_start_us;
      slice.end_us = to_host ? copy.out_end_us : copy.in_end_us;
      slice.begin_step = StepAt(timed, slice.start_us, num_steps);
      slice.end_step = std::max(slice.begin_step, StepAt(timed, slice.end_us, num_steps));
      slices.push_back(slice);
    }
  }
  return slices;
}

}  // namespace ckptplan
