#include "ckptplan/regions.h"

#include <algorithm>
#include <limits>

namespace ckptplan {
namespace {

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();

int64_t MaxWithOffset(const std::vector<int64_t>& values, const std::vector<int64_t>& offset) {
  int64_t best = kLowest;
  for (size_t n = 0; n < values.size(); ++n) best = std::max(best, values[n] + offset[n]);
  return best;
}

}  // namespace

RegionalMemory::RegionalMemory(const SimContext& context, const SaveSet& keep,
                               const SimOptions& options)
    : context_(context), options_(options) {
  const Graph& graph = context.graph;
  SimResult whole = Simulate(context, keep, options);
  start_peak_ = peak_ = whole.peak_bytes;
  start_cost_ = cost_ = whole.recompute_cost;
  std::vector<Region> ranges;
  if (context.exact_costs) {
    ranges = FindRegions(context);
  } else if (!graph.nodes.empty()) {
    ranges.push_back({0, static_cast<NodeId>(graph.nodes.size())});
  }
  parts_.resize(ranges.size());
  region_of_node_.resize(graph.nodes.size());
  for (size_t r = 0; r < ranges.size(); ++r) {
    Part& part = parts_[r];
    part.range = ranges[r];
    for (NodeId n = part.range.first; n < part.range.end; ++n) region_of_node_[n] = r;
    Simulate(context, keep, OptionsFor(r), &part.sim);
    part.offset.resize(part.range.end - part.range.first);
    for (size_t n = 0; n < part.offset.size(); ++n) {
      part.offset[n] = whole.node_peak[part.range.first + n] - part.sim.node_peak[n];
    }
    part.max = MaxWithOffset(part.sim.node_peak, part.offset);
  }
  for (TensorId t : context.candidates) parts_[RegionOf(t)].candidates.push_back(t);
  UpdateTop();
}

SimOptions RegionalMemory::OptionsFor(size_t r) const {
  SimOptions options = options_;
  options.record_categories = false;
  options.record_details = false;
  options.first_node = parts_[r].range.first;
  options.end_node = parts_[r].range.end;
  return options;
}

int64_t RegionalMemory::Outside(size_t r) const {
  return parts_[r].max == top_ && at_top_ == 1 ? second_ : top_;
}

void RegionalMemory::UpdateTop() {
  top_ = second_ = kLowest;
  at_top_ = 0;
  for (const Part& part : parts_) {
    if (part.max > top_) {
      second_ = top_;
      top_ = part.max;
      at_top_ = 1;
    } else if (part.max == top_) {
      second_ = top_;
      ++at_top_;
    } else {
      second_ = std::max(second_, part.max);
    }
  }
  if (!parts_.empty()) peak_ = top_;
}

void RegionalMemory::Try(size_t r, const SaveSet& keep, Trial* trial) const {
  const Part& part = parts_[r];
  Simulate(context_, keep, OptionsFor(r), &trial->sim);
  trial->region = r;
  trial->region_max = MaxWithOffset(trial->sim.node_peak, part.offset);
  trial->peak = std::max(Outside(r), trial->region_max);
  trial->added_cost = trial->sim.recompute_cost - part.sim.recompute_cost;
  // One region is the whole step; several add up exactly (integer costs).
  trial->cost = parts_.size() == 1 ? trial->sim.recompute_cost : cost_ + trial->added_cost;
}

void RegionalMemory::Apply(Trial* trial) {
  Part& part = parts_[trial->region];
  std::swap(part.sim, trial->sim);
  part.max = trial->region_max;
  cost_ = trial->cost;
  UpdateTop();
}

}  // namespace ckptplan
