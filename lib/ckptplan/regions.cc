#include "ckptplan/regions.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace ckptplan {
namespace {

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
// Simulations RegionalMemory keeps for regions' copies, in bytes, at most:
// this much per node of the graph, and at least kMinMemoBytes.
constexpr size_t kMemoBytesPerNode = 96;
constexpr size_t kMinMemoBytes = size_t{4} << 20;

// `from`, a simulation of a region, as the simulation of its copy whose node
// and tensor ids are larger by `node_shift` and `tensor_shift`.
void CopyShifted(const SimResult& from, int64_t node_shift, int64_t tensor_shift, SimResult* to) {
  *to = from;
  for (Step& step : to->steps) step.node = static_cast<NodeId>(step.node + node_shift);
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

// Compares regions node by node, tensors up to a shift of the ids of those
// the region makes.
class ShapeComparer {
 public:
  explicit ShapeComparer(const SimContext& context) : context_(context), graph_(context.graph) {}

  // First tensor the region makes: tensor ids of copies differ by as much.
  TensorId Base(const Region& region) const {
    for (NodeId n = region.first; n < region.end; ++n) {
      if (!graph_.nodes[n].outputs.empty()) return graph_.nodes[n].outputs[0];
    }
    return 0;
  }

  // Hash of what Same compares, so that only regions of equal hash are compared.
  uint64_t Hash(const Region& region) const {
    const TensorId base = Base(region);
    uint64_t hash = 1469598103934665603ull;
    auto mix = [&](uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
    mix(region.end - region.first);
    for (NodeId n = region.first; n < region.end; ++n) {
      const Node& node = graph_.nodes[n];
      mix(static_cast<uint64_t>(node.phase));
      mix(std::hash<std::string>()(node.op));
      mix(static_cast<uint64_t>(node.workspace_bytes));
      uint64_t cost_bits;
      std::memcpy(&cost_bits, &context_.node_cost[n], sizeof cost_bits);
      mix(cost_bits);
      for (const std::vector<TensorId>* list : {&node.inputs, &node.outputs}) {
        mix(list->size());
        for (TensorId t : *list) {
          mix(Local(t, region) ? uint64_t{t} - base : ~uint64_t{0});
          mix(graph_.tensors[context_.root[t]].bytes);
        }
      }
    }
    return hash;
  }

  // Whether `b` is a copy of `a`, its tensors shifted by `shift`.
  bool Same(const Region& a, const Region& b, int64_t shift) const {
    if (a.end - a.first != b.end - b.first) return false;
    for (NodeId i = 0; i < a.end - a.first; ++i) {
      const NodeId na = a.first + i, nb = b.first + i;
      const Node& x = graph_.nodes[na];
      const Node& y = graph_.nodes[nb];
      if (x.phase != y.phase || x.op != y.op || x.workspace_bytes != y.workspace_bytes ||
          context_.node_cost[na] != context_.node_cost[nb] ||
          x.inputs.size() != y.inputs.size() || x.outputs.size() != y.outputs.size()) {
        return false;
      }
      for (size_t k = 0; k < x.inputs.size(); ++k) {
        if (!SameTensor(x.inputs[k], y.inputs[k], a, b, shift)) return false;
      }
      for (size_t k = 0; k < x.outputs.size(); ++k) {
        if (!SameTensor(x.outputs[k], y.outputs[k], a, b, shift)) return false;
      }
    }
    return true;
  }

 private:
  bool Local(TensorId t, const Region& region) const {
    const NodeId p = graph_.tensors[t].producer;
    return p != kNoId && p >= region.first && p < region.end;
  }

  // Alike in what the simulator reads of a tensor another region made: only
  // whether it is resident, forward-made or a candidate.
  bool SameFlags(TensorId s, TensorId t) const {
    return context_.resident_root[s] == context_.resident_root[t] &&
           context_.forward_produced[s] == context_.forward_produced[t] &&
           context_.is_candidate[s] == context_.is_candidate[t];
  }

  // `s` in `a` and `t` in `b` play the same part.
  bool SameRef(TensorId s, TensorId t, const Region& a, const Region& b, int64_t shift) const {
    const bool local = Local(s, a);
    if (local != Local(t, b)) return false;
    if (!local) return SameFlags(s, t);
    return int64_t{t} - int64_t{s} == shift;
  }

  bool SameTensor(TensorId s, TensorId t, const Region& a, const Region& b, int64_t shift) const {
    if (!SameRef(s, t, a, b, shift) || !SameFlags(s, t)) return false;
    if (!Local(s, a)) return true;
    const Tensor& x = graph_.tensors[s];
    const Tensor& y = graph_.tensors[t];
    if (x.bytes != y.bytes || x.kind != y.kind) return false;
    if ((x.alias_of == kNoId) != (y.alias_of == kNoId)) return false;
    if (x.alias_of != kNoId && !SameRef(x.alias_of, y.alias_of, a, b, shift)) return false;
    const TensorId rs = context_.root[s], rt = context_.root[t];
    if (!SameRef(rs, rt, a, b, shift) || !SameFlags(rs, rt)) return false;
    if (graph_.tensors[rs].bytes != graph_.tensors[rt].bytes) return false;
    // Storages read after the region live to its end.
    const NodeId ls = context_.last_reader[rs], lt = context_.last_reader[rt];
    return (ls != kNoId && ls >= a.end) == (lt != kNoId && lt >= b.end);
  }

  const SimContext& context_;
  const Graph& graph_;
};

}  // namespace

std::vector<RegionShape> ShapeRegions(const SimContext& context,
                                      const std::vector<Region>& regions) {
  std::vector<RegionShape> shapes(regions.size());
  const ShapeComparer comparer(context);
  // Shapes' first regions by hash.
  std::unordered_map<uint64_t, std::vector<size_t>> firsts;
  const NodeId implicit = context.graph.training.implicit_gradient_bytes > 0
                              ? context.first_non_forward
                              : kNoId;
  for (size_t r = 0; r < regions.size(); ++r) {
    RegionShape& shape = shapes[r];
    shape.first_of_shape = r;
    const Region& region = regions[r];
    if (implicit != kNoId && implicit >= region.first && implicit < region.end) continue;
    const TensorId base = comparer.Base(region);
    std::vector<size_t>& same_hash = firsts[comparer.Hash(region)];
    for (size_t f : same_hash) {
      const int64_t shift = int64_t{base} - int64_t{comparer.Base(regions[f])};
      if (!comparer.Same(regions[f], region, shift)) continue;
      shape.first_of_shape = f;
      shape.node_shift = int64_t{region.first} - int64_t{regions[f].first};
      shape.tensor_shift = shift;
      break;
    }
    if (shape.first_of_shape == r) same_hash.push_back(r);
  }
  std::vector<size_t> copies(regions.size(), 0);
  for (const RegionShape& shape : shapes) ++copies[shape.first_of_shape];
  for (RegionShape& shape : shapes) shape.copies = copies[shape.first_of_shape];
  return shapes;
}

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
    const SimResult& sim = *part.sim.own();
    Simulate(context, keep, OptionsFor(r), part.sim.own());
    part.offset.resize(part.range.end - part.range.first);
    for (size_t n = 0; n < part.offset.size(); ++n) {
      part.offset[n] = whole.node_peak[part.range.first + n] - sim.node_peak[n];
    }
    part.max = MaxWithOffset(sim.node_peak, part.offset);
  }
  for (TensorId t : context.candidates) parts_[RegionOf(t)].candidates.push_back(t);
  const std::vector<RegionShape> shapes = ShapeRegions(context, ranges);
  for (size_t r = 0; r < parts_.size(); ++r) {
    Part& part = parts_[r];
    part.shape = shapes[r];
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

uint64_t RegionalMemory::PlanKey(size_t r, const SaveSet& keep,
                                 std::vector<uint8_t>* plan) const {
  const Part& part = parts_[r];
  plan->resize(part.candidates.size());
  uint64_t key = 0x9e3779b97f4a7c15ull * (part.shape.first_of_shape + 1);
  for (size_t i = 0; i < part.candidates.size(); ++i) {
    const uint8_t saved = keep[part.candidates[i]] != 0;
    (*plan)[i] = saved;
    key = (key ^ saved) * 0x100000001b3ull;
  }
  return key;
}

void RegionalMemory::Try(size_t r, const SaveSet& keep, Trial* trial, bool need_sim) const {
  const Part& part = parts_[r];
  trial->region = r;
  trial->has_sim = true;
  double region_cost = 0;  // the region's recompute cost after
  if (part.shape.copies <= 1) {
    const SimResult& sim = *trial->sim.own();
    Simulate(context_, keep, OptionsFor(r), trial->sim.own());
    trial->region_max = MaxWithOffset(sim.node_peak, part.offset);
    region_cost = sim.recompute_cost;
  } else {
    const uint64_t key = PlanKey(r, keep, &plan_);
    auto found = memo_.find(key);
    const Memo* memo = found == memo_.end() ? nullptr : &found->second;
    if (memo != nullptr &&
        (memo->plan != plan_ || (need_sim && !memo->sim) ||
         parts_[memo->source].shape.first_of_shape != part.shape.first_of_shape)) {
      memo = nullptr;
    }
    if (memo == nullptr) {
      const SimResult& sim = *trial->sim.own();
      Simulate(context_, keep, OptionsFor(r), trial->sim.own());
      trial->region_max = MaxWithOffset(sim.node_peak, part.offset);
      region_cost = sim.recompute_cost;
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
      stored.recompute_cost = sim.recompute_cost;
      stored.region_max = trial->region_max;
      if (need_sim) {
        auto shared = std::make_shared<SimResult>(sim);
        stored.sim = shared;
        stored.node_peak.clear();
        stored.bytes = SimBytes(sim);
        trial->sim.Share(std::move(shared), 0, 0);
      } else {
        stored.sim.reset();
        stored.node_peak = sim.node_peak;
        stored.bytes = stored.node_peak.size() * sizeof(int64_t);
      }
      stored.bytes += plan_.size();
      memo_bytes_ += stored.bytes;
    } else {
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
    }
  }
  trial->peak = std::max(Outside(r), trial->region_max);
  trial->added_cost = region_cost - part.sim.figures().recompute_cost;
  // One region is the whole step; several add up exactly (integer costs).
  trial->cost = parts_.size() == 1 ? region_cost : cost_ + trial->added_cost;
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
