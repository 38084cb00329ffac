#include "ckptplan/sim/regions.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>

namespace ckptplan {
namespace {

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
// Simulations RegionalMemory keeps for regions' copies, in bytes, at most:
// this much per node of the graph, and at least kMinMemoBytes.
constexpr size_t kMemoBytesPerNode = 48;
constexpr size_t kMinMemoBytes = size_t{4} << 20;

// `from`, a simulation of a region, as the simulation of its copy whose node
// and tensor ids are larger by `node_shift` and `tensor_shift`.
void CopyShifted(const SimResult& from, int64_t node_shift, int64_t tensor_shift, SimResult* to) {
  *to = from;
  for (Step& step : to->steps) step.node = static_cast<NodeId>(step.node + node_shift);
  if (to->max_own_node != kNoId) {
    to->max_own_node = static_cast<NodeId>(to->max_own_node + node_shift);
  }
  for (Buffer& buffer : to->buffers) {
    buffer.root = static_cast<TensorId>(buffer.root + tensor_shift);
  }
  for (Recompute& recompute : to->recomputes) {
    recompute.tensor = static_cast<TensorId>(recompute.tensor + tensor_shift);
    for (NodeId& n : recompute.chain) n = static_cast<NodeId>(n + node_shift);
  }
}

}  // namespace

const SimResult& RegionSim::full() const {
  if (shared_) {
    CopyShifted(*shared_, node_shift_, tensor_shift_, &own_);
    shared_.reset();
  }
  return own_;
}

void RegionSim::Share(std::shared_ptr<const SimResult> sim, int64_t node_shift,
                      int64_t tensor_shift) {
  shared_ = std::move(sim);
  node_shift_ = node_shift;
  tensor_shift_ = tensor_shift;
}

void RegionSim::swap(RegionSim& other) {
  std::swap(own_, other.own_);
  std::swap(shared_, other.shared_);
  std::swap(node_shift_, other.node_shift_);
  std::swap(tensor_shift_, other.tensor_shift_);
}

namespace {

size_t SimBytes(const SimResult& sim) {
  return sim.steps.size() * sizeof(Step) + sim.total.size() * sizeof(int64_t) +
         sim.node_peak.size() * sizeof(int64_t) + sim.buffers.size() * sizeof(Buffer);
}

int64_t MaxWithOffset(const std::vector<int64_t>& values, const std::vector<int64_t>& offset) {
  int64_t best = kLowest;
  for (size_t n = 0; n < values.size(); ++n) best = std::max(best, values[n] + offset[n]);
  return best;
}

// The highest of `sim`'s node peaks in the step's bytes; the simulation's
// own peak when no offset is added (every step is in some node's group).
int64_t RegionMax(const SimResult& sim, const std::vector<int64_t>& offset, bool zero_offset) {
  if (zero_offset && !sim.steps.empty()) return sim.peak_bytes;
  return MaxWithOffset(sim.node_peak, offset);
}

}  // namespace

RegionalMemory::RegionalMemory(const SimContext& context, const SaveSet& keep,
                               const SimOptions& options)
    : context_(context), options_(options) {
  const Graph& graph = context.graph;
  // Only the peaks and the cost are read from the whole step's simulation.
  SimOptions figures = options;
  figures.record_details = false;
  figures.record_categories = false;
  SimResult whole = Simulate(context, keep, figures);
  start_peak_ = peak_ = whole.peak_bytes;
  start_cost_ = cost_ = whole.recompute_cost;
  std::vector<Region> ranges;
  if (context.exact_costs) {
    ranges = context.regions();
  } else if (!graph.nodes.empty()) {
    ranges.push_back({0, static_cast<NodeId>(graph.nodes.size())});
  }
  parts_.resize(ranges.size());
  split_ = context.exact_costs;
  for (size_t r = 0; r < ranges.size(); ++r) parts_[r].range = ranges[r];
  for (TensorId t : context.candidates) parts_[RegionOf(t)].candidates.push_back(t);
  const std::vector<RegionShape> shapes =
      context.exact_costs ? context.shapes() : ShapeRegions(context, ranges);
  // Copies of a region (same shape) with the same plan simulate the same,
  // but for ids: the first one's simulation is shared with the others (as
  // Try shares trials), by the plan's key.
  struct Simulated {
    size_t source;
    std::vector<uint8_t> plan;
    std::shared_ptr<const SimResult> sim;
  };
  std::unordered_multimap<uint64_t, Simulated> simulated;
  for (size_t r = 0; r < ranges.size(); ++r) {
    Part& part = parts_[r];
    part.shape = shapes[r];
    part.offset.assign(part.range.end - part.range.first, 0);
    if (ranges.size() == 1 && part.range.first == 0 && part.range.end == graph.nodes.size()) {
      // The region is the step: its simulation is the one above.
      *part.sim.own() = std::move(whole);
      part.zero_offset = true;
      part.max = RegionMax(part.sim.figures(), part.offset, part.zero_offset);
      continue;
    }
    const Simulated* same = nullptr;
    uint64_t key = 0;
    if (part.shape.copies > 1) {
      key = PlanKey(r, keep, &plan_);
      for (auto [it, end] = simulated.equal_range(key); it != end && same == nullptr; ++it) {
        if (it->second.plan == plan_ &&
            parts_[it->second.source].shape.first_of_shape == part.shape.first_of_shape) {
          same = &it->second;
        }
      }
    }
    if (same != nullptr) {
      const Part& source = parts_[same->source];
      part.sim.Share(same->sim, int64_t{part.range.first} - int64_t{source.range.first},
                     part.shape.tensor_shift - source.shape.tensor_shift);
    } else {
      Simulate(context, keep, OptionsFor(r), part.sim.own());
      ++start_simulations_;
      if (part.shape.copies > 1) {
        auto sim = std::make_shared<SimResult>(part.sim.figures());
        simulated.emplace(key, Simulated{r, plan_, std::move(sim)});
      }
    }
    const SimResult& sim = part.sim.figures();
    for (size_t n = 0; n < part.offset.size(); ++n) {
      part.offset[n] = whole.node_peak[part.range.first + n] - sim.node_peak[n];
    }
    part.zero_offset =
        std::all_of(part.offset.begin(), part.offset.end(), [](int64_t v) { return v == 0; });
    part.max = RegionMax(sim, part.offset, part.zero_offset);
  }
  for (size_t r = 0; r < parts_.size(); ++r) {
    Part& part = parts_[r];
    const Part& first = parts_[part.shape.first_of_shape];
    part.offset_shift = part.offset.empty() ? 0 : part.offset[0] - first.offset[0];
    part.offsets_match = true;
    for (size_t n = 0; n < part.offset.size() && part.offsets_match; ++n) {
      part.offsets_match = part.offset[n] - first.offset[n] == part.offset_shift;
    }
  }
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
  maxes_.resize(parts_.size());
  for (size_t r = 0; r < parts_.size(); ++r) {
    const int64_t max = maxes_[r] = parts_[r].max;
    if (max > top_) {
      second_ = top_;
      top_ = max;
      at_top_ = 1;
    } else if (max == top_) {
      second_ = top_;
      ++at_top_;
    } else {
      second_ = std::max(second_, max);
    }
  }
  if (!parts_.empty()) peak_ = top_;
}

uint64_t RegionPlanKey(const RegionShape& shape, const std::vector<uint8_t>& plan) {
  // Eight plan bytes at a time: copies' trials look their plan up once per
  // re-save tried (cleanup), so the hash is on the path of most trials of a
  // graph of many microbatches.
  uint64_t key = 0x9e3779b97f4a7c15ull * (shape.first_of_shape + 1);
  const size_t size = plan.size();
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, plan.data() + i, sizeof(word));
    key = (key ^ word) * 0x100000001b3ull;
    key ^= key >> 29;
  }
  for (; i < size; ++i) key = (key ^ plan[i]) * 0x100000001b3ull;
  return key ^ size;
}

uint64_t RegionalMemory::PlanKey(size_t r, const SaveSet& keep,
                                 std::vector<uint8_t>* plan) const {
  const Part& part = parts_[r];
  const size_t count = part.candidates.size();
  plan->resize(count);
  uint8_t* bits = plan->data();
  for (size_t i = 0; i < count; ++i) bits[i] = keep[part.candidates[i]] != 0;
  return RegionPlanKey(part.shape, *plan);
}

void RegionalMemory::Try(size_t r, const SaveSet& keep, Trial* trial, bool need_sim) const {
  const Part& part = parts_[r];
  trial->region = r;
  trial->has_sim = true;
  // A trial of a copy of this region with the same plan, when there is one.
  const bool shared = part.shape.copies > 1;
  const uint64_t key = shared ? PlanKey(r, keep, &plan_) : 0;
  const Memo* memo = nullptr;
  if (shared) {
    auto found = memo_.find(key);
    if (found != memo_.end() && found->second.plan == plan_ && (!need_sim || found->second.sim) &&
        parts_[found->second.source].shape.first_of_shape == part.shape.first_of_shape) {
      memo = &found->second;
    }
  }
  double region_cost = 0;  // the region's recompute cost after
  if (memo != nullptr) {
    ++shared_trials_;
    const Part& source = parts_[memo->source];
    if (need_sim) {
      trial->sim.Share(memo->sim, int64_t{part.range.first} - int64_t{source.range.first},
                       part.shape.tensor_shift - source.shape.tensor_shift);
    }
    trial->has_sim = need_sim;
    if (part.offsets_match && source.offsets_match) {
      trial->region_max = memo->region_max + part.offset_shift - source.offset_shift;
    } else {
      trial->region_max =
          MaxWithOffset(memo->sim ? memo->sim->node_peak : memo->node_peak, part.offset);
    }
    region_cost = memo->recompute_cost;
  } else {
    SimResult* sim = trial->sim.own();
    Simulate(context_, keep, OptionsFor(r), sim);
    trial->region_max = RegionMax(*sim, part.offset, part.zero_offset);
    region_cost = sim->recompute_cost;
    if (shared) {
      const size_t most =
          std::max(kMinMemoBytes, kMemoBytesPerNode * context_.graph.nodes.size());
      if (memo_bytes_ > most) {
        memo_.clear();
        memo_bytes_ = 0;
      }
      Memo& stored = memo_[key];
      memo_bytes_ -= stored.bytes;
      stored.source = r;
      stored.plan = plan_;
      stored.recompute_cost = sim->recompute_cost;
      stored.region_max = trial->region_max;
      if (need_sim) {
        stored.sim = std::make_shared<const SimResult>(*sim);
        stored.node_peak.clear();
        stored.bytes = SimBytes(*sim);
      } else {
        stored.sim.reset();
        stored.node_peak = sim->node_peak;
        stored.bytes = stored.node_peak.size() * sizeof(int64_t);
      }
      stored.bytes += plan_.size();
      memo_bytes_ += stored.bytes;
    }
  }
  FinishTrial(r, region_cost, parts_[r].sim.figures().recompute_cost, trial);
}

void RegionalMemory::Take(size_t r, Trial* trial) const {
  const Part& part = parts_[r];
  assert(part.shape.copies == 1);
  trial->region = r;
  trial->has_sim = true;
  const SimResult& sim = trial->sim.full();
  trial->region_max = RegionMax(sim, part.offset, part.zero_offset);
  FinishTrial(r, sim.recompute_cost, parts_[r].sim.figures().recompute_cost, trial);
}

void RegionalMemory::FinishTrial(size_t r, double region_cost, double region_cost_before,
                                 Trial* trial) const {
  trial->peak = std::max(Outside(r), trial->region_max);
  trial->added_cost = region_cost - region_cost_before;
  // One region is the whole step; several add up exactly (integer costs).
  trial->cost = parts_.size() == 1 ? region_cost : cost_ + trial->added_cost;
}

void RegionalMemory::TakePatched(size_t r, double before, Trial* figures) {
  Part& part = parts_[r];
  const SimResult& sim = part.sim.full();
  figures->region_max = RegionMax(sim, part.offset, part.zero_offset);
  FinishTrial(r, sim.recompute_cost, before, figures);
  part.max = figures->region_max;
  cost_ = figures->cost;
  UpdateTop();
}

void RegionalMemory::Apply(Trial* trial) {
  assert(trial->has_sim);
  Part& part = parts_[trial->region];
  part.sim.swap(trial->sim);
  part.max = trial->region_max;
  cost_ = trial->cost;
  UpdateTop();
}

}  // namespace ckptplan
