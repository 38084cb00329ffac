#include "ckptplan/plan/cleanup.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "ckptplan/base/text_escape.h"
#include "ckptplan/base/console.h"
#include "ckptplan/sim/regions.h"

namespace ckptplan {
namespace {

constexpr uint32_t kNoStep = UINT32_MAX;
constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
constexpr int64_t kHighest = std::numeric_limits<int64_t>::max();

struct Gain {
  TensorId tensor;
  double saved_cost;  // recompute cost removed by re-saving it
};

// The most pending re-saves the cleanup catches its simulation up with by
// patches, one at a time, rather than by simulating them all at once.
constexpr size_t kPatchedCatchUp = 4;

}  // namespace

ResaveBounds::ResaveBounds(const SimContext& context)
    : context_(context), facts_(context) {}

bool ResaveBounds::Exceeds(const RegionalMemory& memory, TensorId t, int64_t budget) {
  const size_t r = memory.RegionOf(t);
  if (memory.part(r).shape.copies > 1) return false;
  if (prepared_ != r) Prepare(memory, r);
  return Floor(t) > budget;
}

ResaveBounds::Verdict ResaveBounds::Judge(const RegionalMemory& memory, const SaveSet& keep,
                                          TensorId t, int64_t budget, double* added_cost) {
  exact_ = false;
  shape_.known = false;
  if (Exceeds(memory, t, budget)) return Verdict::kExceeds;
  const size_t r = memory.RegionOf(t);
  if (!context_.exact_costs || memory.part(r).shape.copies > 1) return Verdict::kUnknown;
  int64_t chain_floor = kLowest;
  int64_t ceiling = Ceiling(keep, t, memory.peak(), added_cost, &chain_floor);
  if (chain_floor > budget) return Verdict::kExceeds;
  if (ceiling == kHighest) ceiling = ByproductCeiling(t, memory.peak(), added_cost);
  if (ceiling <= budget) {
    shape_.peak = ceiling;
    shape_.added_cost = *added_cost;
    return Verdict::kFits;
  }
  // The region's own simulation (Exceeds prepared it): DropDelta scores the
  // re-save exactly where it handles it.
  if (tensor_shift_ != 0) return Verdict::kUnknown;
  IndexDelta(keep);
  const DropDelta::Result scored = delta_->ScoreResave(t);
  if (!scored.known) return Verdict::kUnknown;
  exact_ = true;
  *added_cost = scored.added_cost;
  // A ceiling that was too high still read the re-save's shape.
  shape_.peak = std::max(memory.Outside(r), scored.region_max);
  shape_.added_cost = scored.added_cost;
  return shape_.peak <= budget ? Verdict::kFits : Verdict::kExceeds;
}

void ResaveBounds::IndexDelta(const SaveSet& keep) {
  if (delta_ready_) return;
  if (!ceilings_ready_) PrepareCeilings();
  if (!delta_) delta_ = std::make_unique<DropDelta>(context_, &facts_);
  facts_.FillSaved(keep);  // DropDelta's index asks for them; re-save scores do not read them
  delta_->Index(*sim_, keep, first_, static_cast<NodeId>(first_ + num_nodes_),
                part_->zero_offset ? nullptr : &part_->offset,
                part_->zero_offset ? &node_peak_ : nullptr);
  delta_ready_ = true;
}

bool ResaveBounds::PatchExact(const RegionalMemory& memory, const SaveSet& keep, TensorId t,
                              RegionalMemory::Trial* trial) {
  exact_ = false;
  shape_.known = false;
  const size_t r = memory.RegionOf(t);
  if (!context_.exact_costs || memory.part(r).shape.copies != 1) return false;
  if (prepared_ != r) Prepare(memory, r);
  if (tensor_shift_ != 0) return false;
  IndexDelta(keep);
  if (!delta_->ScoreResave(t).known) return false;
  exact_ = true;
  return Patch(memory, t, trial);
}

bool ResaveBounds::Patch(const RegionalMemory& memory, TensorId t, RegionalMemory::Trial* trial) {
  const size_t r = memory.RegionOf(t);
  if (!exact_ || !delta_ready_ || prepared_ != r || tensor_shift_ != 0 ||
      memory.part(r).shape.copies != 1 ||
      !delta_->PatchResave(t, memory.OptionsFor(r), trial->sim.own())) {
    return false;
  }
  memory.Take(r, trial);
  patch_region_ = r;
  patch_fills_ = facts_.fills();
  patch_same_ = delta_->patched_prefix();
  patch_moved_ = delta_->group_changes();
  return true;
}

void ResaveBounds::RecordShape(uint32_t first, uint32_t last, bool removes, uint32_t held_after,
                               uint32_t held_to, int64_t between, TensorId root) {
  shape_.known = true;
  shape_.removes = removes;
  shape_.first = first;
  shape_.last = last;
  shape_.held_after = held_after;
  shape_.held_to = held_to;
  shape_.between = between;
  shape_.root = root;
  shape_.bytes = context_.bytes[root];
}

void ResaveBounds::Pend() {
  if (pending_.empty()) {
    pending_peak_ = shape_.peak;
    pending_cost_ = 0;
  }
  pending_peak_ = std::max(pending_peak_, shape_.peak);
  pending_cost_ += shape_.added_cost;
  pending_.push_back(shape_);
  shape_.known = false;
}

ResaveBounds::Verdict ResaveBounds::JudgePending(const SaveSet& keep, TensorId t, int64_t budget,
                                                 double* added_cost) {
  exact_ = false;
  shape_.known = false;
  if (prepared_ == SIZE_MAX || tensor_shift_ != 0 || !context_.exact_costs) {
    return Verdict::kUnknown;
  }
  int64_t ceiling = Ceiling(keep, t, pending_peak_, added_cost);
  if (ceiling == kHighest) ceiling = ByproductCeiling(t, pending_peak_, added_cost);
  if (ceiling == kHighest) return Verdict::kUnknown;
  shape_.known = false;  // until it is known to hold on top of the pending ones
  // The steps each holds a storage over, from..to (exclusive); none when
  // the original is read last at or after them.
  auto held = [](const Shape& s, uint32_t* from, uint32_t* to) {
    if (s.held_after == kNoStep || s.held_after + 1 >= s.held_to) return false;
    *from = s.held_after + 1;
    *to = s.held_to;
    return true;
  };
  uint32_t from = 0, to = 0;
  const bool holds = held(shape_, &from, &to);
  int64_t between = shape_.between;
  for (const Shape& p : pending_) {
    // Neither may remove a step the other read, nor share its storage.
    if (p.root == shape_.root) return Verdict::kUnknown;
    if ((p.removes || shape_.removes) && p.first <= shape_.last && shape_.first <= p.last) {
      return Verdict::kUnknown;
    }
    if (p.removes && shape_.held_after != kNoStep && p.first <= shape_.held_after &&
        shape_.held_after <= p.last) {
      return Verdict::kUnknown;
    }
    if (shape_.removes && p.held_after != kNoStep && shape_.first <= p.held_after &&
        p.held_after <= shape_.last) {
      return Verdict::kUnknown;
    }
    uint32_t p_from = 0, p_to = 0;
    if (holds && between != kLowest && held(p, &p_from, &p_to) && p_from < to && from < p_to) {
      between += p.bytes;
    }
  }
  int64_t peak = pending_peak_;
  if (holds && between != kLowest) peak = std::max(peak, between + shape_.bytes);
  if (peak > budget) return Verdict::kUnknown;
  shape_.known = true;
  shape_.peak = peak;
  shape_.added_cost = *added_cost;
  return Verdict::kFits;
}

void ResaveBounds::Prepare(const RegionalMemory& memory, size_t r) {
  prepared_ = r;
  pending_.clear();
  const RegionalMemory::Part& part = memory.part(r);
  // A simulation shared with a copy of the region is read as it is, in the
  // copy's ids (a region's own copy of it would cost as much as the floors save).
  const SimResult& sim = part.sim.figures();
  tensor_shift_ = part.sim.tensor_shift();
  first_ = static_cast<NodeId>(part.range.first - part.sim.node_shift());
  num_nodes_ = sim.node_peak.size();
  // After a patch of the simulation read last, only what it changed.
  const bool patched = patch_applied_ && patch_region_ == r && patch_fills_ == facts_.fills() &&
                       tensor_shift_ == 0;
  patch_applied_ = false;
  if (!part.zero_offset) {
    int64_t* node_peak = node_peak_.Reset(num_nodes_);
    for (size_t n = 0; n < num_nodes_; ++n) node_peak[n] = sim.node_peak[n] + part.offset[n];
    node_peak_.Finish();
    peaks_region_ = SIZE_MAX;
  } else if (patched && peaks_region_ == r && node_peak_.size() == num_nodes_) {
    patch_moved_.ApplyTo(sim.node_peak, &node_peak_);
    const std::string mismatch =
        verify_ ? DropDelta::GroupChanges::Mismatch(node_peak_, sim.node_peak, context_.graph,
                                                    first_)
                : "";
    if (!mismatch.empty()) throw std::logic_error("cleanup: " + mismatch);
  } else {
    node_peak_.Build(sim.node_peak.data(), num_nodes_);
    peaks_region_ = tensor_shift_ == 0 ? r : SIZE_MAX;
  }
  // Groups and storages; the reads only ceilings need come on first use.
  SimPrefix same;
  if (patched) same = patch_same_;
  const NodeId end = static_cast<NodeId>(first_ + num_nodes_);
  facts_.Fill(sim, first_, end, same);
  if (verify_ && (same.steps > 0 || same.buffers > 0)) {
    const std::string difference = DifferenceFromWholeFill(facts_);
    if (!difference.empty()) {
      throw std::logic_error("cleanup: the step facts filled after a patch differ from a whole "
                             "fill in " + difference);
    }
  }
  // Floors and ceilings read more of it, on first use.
  leaving_ready_ = false;
  sim_ = &sim;
  offset_ = &part.offset;
  part_ = &part;
  ceilings_ready_ = delta_ready_ = false;
}

void ResaveBounds::PrepareCeilings() {
  ceilings_ready_ = true;
  const SimResult& sim = *sim_;
  const size_t num_steps = sim.steps.size();
  if (part_->zero_offset) {
    step_bytes_ = sim.total.data();  // read in place until the next Prepare
  } else {
    ReserveSteps(step_total_, num_steps);
    step_total_.resize(num_steps);
    for (uint32_t s = 0; s < num_steps; ++s) {
      step_total_[s] = sim.total[s] + (*offset_)[facts_.Group(s) - first_];
    }
    step_bytes_ = step_total_.data();
  }
  facts_.FillReads();
  if (verify_) {
    const std::string difference = DifferenceFromWholeFill(facts_);
    if (!difference.empty()) {
      throw std::logic_error("cleanup: the step facts' reads differ from a whole fill's in " +
                             difference);
    }
  }
}

int64_t ResaveBounds::HighestBetween(uint32_t after, uint32_t before, int64_t* gap) const {
  // Whole groups through the node peaks, the two partial ones step by step.
  int64_t highest = kLowest;
  const NodeId after_group = facts_.Group(after), before_group = facts_.Group(before);
  uint32_t s = after + 1;
  for (; s < before && facts_.Group(s) == after_group; ++s) {
    highest = std::max(highest, step_bytes_[s]);
  }
  if (after_group + 1 < before_group) {
    *gap = node_peak_.Query(after_group + 1 - first_, before_group - first_);
    highest = std::max(highest, *gap);
  }
  for (s = std::max(s, facts_.GroupBegin(before_group)); s < before; ++s) {
    highest = std::max(highest, step_bytes_[s]);
  }
  return highest;
}

uint32_t ResaveBounds::Rerun(NodeId node) const {
  return node >= first_ && node - first_ < num_nodes_ ? facts_.RerunStep(node) : kNoStep;
}

uint32_t ResaveBounds::CopyStep(TensorId t) const {
  const uint32_t b = facts_.Copy(t);
  return b == StepFacts::kNone ? kNoStep : facts_.sim()->buffers[b].first_step;
}

uint32_t ResaveBounds::CopyLast(TensorId t) const {
  const uint32_t b = facts_.Copy(t);
  return b == StepFacts::kNone ? kNoStep : facts_.sim()->buffers[b].last_step;
}

uint32_t ResaveBounds::OriginalLast(TensorId root) const {
  const uint32_t b = facts_.Original(root);
  return b == StepFacts::kNone ? kNoStep : facts_.sim()->buffers[b].last_step;
}

const std::vector<int64_t>& ResaveBounds::Leaving() const {
  if (leaving_ready_) return leaving_;
  leaving_ready_ = true;
  const SimResult& sim = *sim_;
  const size_t num_steps = sim.steps.size();
  // Differences first: +bytes after the first step, -bytes after the last.
  ReserveSteps(leaving_, num_steps + 1);
  leaving_.assign(num_steps + 1, 0);
  for (const Buffer& buffer : sim.buffers) {
    if (sim.steps[buffer.last_step].recompute) {
      leaving_[buffer.first_step + 1] += context_.bytes[buffer.root];
      leaving_[buffer.last_step + 1] -= context_.bytes[buffer.root];
    }
  }
  for (size_t s = 1; s <= num_steps; ++s) leaving_[s] += leaving_[s - 1];
  return leaving_;
}

int64_t ResaveBounds::Floor(TensorId t) const {
  // Only a tensor whose storage is an activation, whose copy and original
  // both show in the simulation. A view's copy is made where the plan
  // re-runs its producer (read in the region's own simulation only, whose
  // node ids are the region's); re-saving it keeps its root's original.
  const TensorId root = context_.root[t];
  if (context_.made[root] != SimContext::Made::kActivation) return kLowest;
  const TensorId id = static_cast<TensorId>(root - tensor_shift_);  // in the simulation's ids
  uint32_t copy = kNoStep;
  if (root == t) {
    copy = CopyStep(id);
  } else if (tensor_shift_ == 0) {
    copy = Rerun(context_.producer[t]);
  }
  const uint32_t last = OriginalLast(id);
  if (copy == kNoStep || last == kNoStep) return kLowest;
  const NodeId copy_group = facts_.Group(copy);
  const NodeId last_group = facts_.Group(last);
  if (last_group + 1 >= copy_group) return kLowest;
  const int64_t highest = node_peak_.Query(last_group + 1 - first_, copy_group - first_);
  // Less the storages live before the copy's group that may now end before it.
  return highest + context_.bytes[root] - Leaving()[facts_.GroupBegin(copy_group)];
}

int64_t ResaveBounds::Ceiling(const SaveSet& keep, TensorId t, int64_t step_peak,
                              double* added_cost, int64_t* chain_floor) {
  if (chain_floor != nullptr) *chain_floor = kLowest;
  const TensorId root = context_.root[t];
  if (tensor_shift_ != 0 || context_.made[root] != SimContext::Made::kActivation) {
    return kHighest;
  }
  if (!ceilings_ready_) PrepareCeilings();
  const SimResult& sim = *sim_;
  // The chain: the steps from a chain start through the re-run of t's
  // producer, which must end it.
  const uint32_t end = Rerun(context_.producer[t]);
  if (end == kNoStep || facts_.RecomputeRead(t)) return kHighest;
  const size_t num_steps = sim.steps.size();
  if (end + 1 < num_steps && sim.steps[end + 1].recompute && !sim.steps[end + 1].starts_chain) {
    return kHighest;
  }
  uint32_t start = end;
  while (!sim.steps[start].starts_chain) {
    if (start == 0 || !sim.steps[start - 1].recompute) return kHighest;
    --start;
  }
  // Nothing else it made is read after it, but from a saved storage; the
  // storage `t` shares is the chain's own, or else saved.
  const uint32_t root_step = Rerun(context_.producer[root]);
  const bool root_saved = context_.is_candidate[root] && keep[root];
  if (!root_saved && (root_step == kNoStep || root_step < start || root_step > end)) {
    return kHighest;
  }
  double cost = 0;
  for (uint32_t s = start; s <= end; ++s) {
    const NodeId node = sim.steps[s].node;
    cost += context_.node_cost[node];
    for (uint32_t i = context_.outputs_begin[node]; i < context_.inputs_begin[node + 1]; ++i) {
      const TensorId made = context_.ids[i];
      if (made == t || (context_.is_candidate[made] && keep[made])) continue;
      if (facts_.LastRead(made) != kNoStep && facts_.LastRead(made) > end) return kHighest;
    }
  }
  // The steps after the original's last read and before the chain hold the
  // storage on top.
  int64_t highest = step_peak;
  int64_t gap = kLowest;  // the whole groups' highest node
  const int64_t bytes = context_.bytes[root];
  const uint32_t last = OriginalLast(root);
  int64_t between = kLowest;
  if (last != kNoStep && last < start) {
    between = HighestBetween(last, start, &gap);
    highest = std::max(highest, between + bytes);
  }
  RecordShape(start, end, /*removes=*/true, last, start, between, root);
  *added_cost = -cost;
  if (chain_floor != nullptr && gap != kLowest) {
    // Only storages whose last read is a step of the chain can end before
    // it once the chain is gone; its inputs name them.
    int64_t leaving = 0;
    roots_.clear();
    for (uint32_t s = start; s <= end; ++s) {
      const NodeId node = sim.steps[s].node;
      for (uint32_t i = context_.inputs_begin[node]; i < context_.outputs_begin[node]; ++i) {
        const TensorId in = context_.ids[i];
        if (context_.resident_root[in]) continue;
        if (context_.made[in] == SimContext::Made::kAlias) return highest;
        const bool original = !context_.forward_produced[in] ||
                              (context_.is_candidate[in] && keep[in]);
        const uint32_t read_last = original ? OriginalLast(in) : CopyLast(in);
        // A copy the chain itself made ends with it anyway.
        if (!original && CopyStep(in) >= start) continue;
        if (read_last == kNoStep || read_last < start || read_last > end) continue;
        if (std::find(roots_.begin(), roots_.end(), in) != roots_.end()) continue;
        roots_.push_back(in);
        leaving += context_.bytes[in];
      }
    }
    *chain_floor = gap + bytes - leaving;
  }
  return highest;
}

int64_t ResaveBounds::ByproductCeiling(TensorId t, int64_t step_peak, double* added_cost) {
  if (tensor_shift_ != 0 || context_.root[t] != t ||
      context_.made[t] != SimContext::Made::kActivation) {
    return kHighest;
  }
  if (!ceilings_ready_) PrepareCeilings();
  const SimResult& sim = *sim_;
  // The copy: made where t's producer is re-run, in a chain for another
  // tensor; no step of that group reads it.
  const uint32_t made = Rerun(context_.producer[t]);
  if (made == kNoStep || CopyStep(t) != made) return kHighest;
  uint32_t own = made + 1;  // the group's own step
  for (; own < sim.steps.size(); ++own) {
    const Step& step = sim.steps[own];
    for (uint32_t i = context_.inputs_begin[step.node]; i < context_.outputs_begin[step.node]; ++i) {
      if (context_.ids[i] == t) return kHighest;
    }
    if (!step.recompute) break;
  }
  if (own == sim.steps.size()) return kHighest;
  // Until the copy is made the steps run as before, plus the original from
  // its last read on; from there the original stands for the copy.
  int64_t highest = step_peak;
  const uint32_t last = OriginalLast(t);
  if (last == kNoStep) return kHighest;
  int64_t between = kLowest;
  if (last < made) {
    // `made` is a recompute step: the step after it is in its group.
    int64_t gap = kLowest;
    between = HighestBetween(last, made + 1, &gap);
    highest = std::max(highest, between + context_.bytes[t]);
  }
  RecordShape(made, made, /*removes=*/false, last, made + 1, between, t);
  *added_cost = 0;
  return highest;
}

CleanupResult ResaveDropped(const Graph& graph, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes) {
  return ResaveDropped(SimContext(graph), keep, budget_bytes, reserve_bytes);
}

CleanupResult ResaveDropped(const SimContext& context, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes, const CleanupOptions& cleanup_options) {
  const bool verify = cleanup_options.verify;
  const Graph& graph = context.graph;
  const auto started = std::chrono::steady_clock::now();
  SimOptions options;
  options.reserve_bytes = reserve_bytes;
  CleanupResult result;
  result.keep = keep;
  // Each try re-simulates only the region of the tensor re-saved.
  RegionalMemory memory(context, result.keep, options);
  result.peak_before = memory.start_peak();
  result.cost_before = memory.start_cost();
  RegionalMemory::Trial trial, verify_trial;
  bool changed = memory.peak() <= budget_bytes;
  // While the plan fits, a re-save fits when its own region stays within the
  // budget: a region no re-save changed in a round has none in the next.
  std::vector<uint8_t> region_changed(memory.size(), 1);
  size_t rounds = 0, tried = 0, floored = 0, ceilinged = 0, known = 0, scored = 0, pended = 0,
         caught_up = 0, patched = 0, patched_up = 0;
  std::vector<TensorId> pending_tensors;  // re-saves pending (ResaveBounds::Pend), in order
  // Re-saves whose floor is over the budget are not simulated, nor, while
  // ranking, those whose ceiling is within it.
  ResaveBounds bounds(context);
  bounds.set_verify(verify);
  bool trial_patched = false;  // `trial` holds the last bounds.Patch's
  // While the plan fits, whether a re-save fits depends on its region's plan
  // alone: one that did not fit is not tried again until that plan changes.
  constexpr uint32_t kNever = UINT32_MAX;
  std::vector<uint32_t> version(memory.size(), 0);  // per region: re-saves applied
  std::vector<uint32_t> failed_at(graph.tensors.size(), kNever);
  // Tries re-saving `t` (result.keep[t] set); false when it does not fit.
  // Otherwise *added_cost is the recompute cost it adds and, with
  // `need_sim`, `trial` holds its simulation, unless bounds.CanPend():
  // then the re-save can be left pending (ResaveBounds::Pend).
  auto try_resave = [&](TensorId t, bool need_sim, double* added_cost) {
    const size_t r = memory.RegionOf(t);
    if (failed_at[t] == version[r]) {
      ++known;
      return false;
    }
    const ResaveBounds::Verdict verdict =
        cleanup_options.prune ? bounds.Judge(memory, result.keep, t, budget_bytes, added_cost)
                              : ResaveBounds::Verdict::kUnknown;
    if (verify && verdict != ResaveBounds::Verdict::kUnknown) {
      // The re-save simulated (into a trial of its own: `trial` may hold the
      // caller's) must bear the verdict out.
      memory.Try(r, result.keep, &verify_trial);
      const bool fits = verdict == ResaveBounds::Verdict::kFits;
      const bool costed = fits || bounds.exact();  // a floor gives no cost
      if ((verify_trial.peak <= budget_bytes) != fits ||
          (costed && verify_trial.added_cost != *added_cost)) {
        throw std::logic_error(
            "cleanup: re-saving '" + graph.tensors[t].name + "' was judged " +
            (fits ? "to fit" : "not to fit") + (bounds.exact() ? " by DropDelta" : "") +
            " at added cost " + std::to_string(*added_cost) + " but simulates to peak " +
            std::to_string(verify_trial.peak) + " (budget " + std::to_string(budget_bytes) +
            "), added cost " + std::to_string(verify_trial.added_cost));
      }
    }
    switch (verdict) {
      case ResaveBounds::Verdict::kExceeds:
        ++(bounds.exact() ? scored : floored);
        failed_at[t] = version[r];
        return false;
      case ResaveBounds::Verdict::kFits:
        if (need_sim && !bounds.CanPend()) {
          trial_patched = false;
          if (!bounds.Patch(memory, t, &trial)) break;
          trial_patched = true;
          // The patch must give the score's figures, and with `verify` the
          // simulation itself.
          std::string difference;
          if (trial.peak > budget_bytes || trial.added_cost != *added_cost) {
            difference = "its figures";
          } else if (verify) {
            difference = SimResultDifference(verify_trial.sim.full(), trial.sim.full());
          }
          if (!difference.empty()) {
            throw std::logic_error("cleanup: DropDelta's patch of re-saving '" +
                                   graph.tensors[t].name + "' differs from its simulation in " +
                                   difference);
          }
          ++patched;
        }
        ++(bounds.exact() ? scored : ceilinged);
        return true;
      case ResaveBounds::Verdict::kUnknown:
        break;
    }
    ++tried;
    trial_patched = false;
    memory.Try(r, result.keep, &trial, need_sim);
    *added_cost = trial.added_cost;
    if (trial.peak <= budget_bytes) return true;
    failed_at[t] = version[r];
    return false;
  };
  if (changed && cleanup_options.stop && !cleanup_options.start_asked &&
      cleanup_options.stop(result.keep)) {
    result.stopped = true;
    spdlog::debug("cleanup: stopped before the first re-save");
    return result;
  }
  while (changed) {
    changed = false;
    ++rounds;
    // Rank the dropped candidates by the recompute a re-save removes.
    std::vector<Gain> gains;
    for (TensorId t : context.candidates) {
      if (result.keep[t] || !region_changed[memory.RegionOf(t)]) continue;
      result.keep[t] = 1;
      double added_cost = 0;
      const bool fits = try_resave(t, /*need_sim=*/false, &added_cost);
      result.keep[t] = 0;
      if (fits) gains.push_back({t, -added_cost});
    }
    std::sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) {
      if (a.saved_cost != b.saved_cost) return a.saved_cost > b.saved_cost;
      return a.tensor < b.tensor;
    });
    std::fill(region_changed.begin(), region_changed.end(), 0);
    // Re-saves whose ceilings fit are applied to the plan and left pending
    // (ResaveBounds::Pend); their region's simulation catches up when a
    // verdict needs it (flush) and at the end of the round.
    // The simulation catches up one re-save at a time, each from DropDelta's
    // patch (the later ones read as dropped), as far as DropDelta handles
    // them; the rest at once, simulated. A few at most: each patch is a pass
    // over the region and the next Prepare another, and one simulation
    // costs about as much as eight patches (GPT-2 batch 8: catching up
    // with two re-saves at a time by patches took 14% off a plan at seq
    // 1024; with 25 at a time, it added 7% at seq 512).
    auto flush = [&]() {
      if (bounds.pending() == 0) return;
      ++caught_up;
      const size_t r = bounds.prepared();
      const int64_t pending_peak = bounds.pending_peak();
      const double pending_cost = bounds.pending_cost();
      const double cost_before = memory.cost();
      bounds.DropPending();
      trial_patched = false;
      size_t applied = 0;
      if (pending_tensors.size() <= kPatchedCatchUp) {
        for (const TensorId p : pending_tensors) result.keep[p] = 0;
        for (; applied < pending_tensors.size(); ++applied) {
          const TensorId p = pending_tensors[applied];
          result.keep[p] = 1;
          if (!bounds.PatchExact(memory, result.keep, p, &trial)) break;
          memory.Apply(&trial);
          bounds.ForgetPatched(r);
          ++patched_up;
        }
        for (size_t i = applied; i < pending_tensors.size(); ++i) {
          result.keep[pending_tensors[i]] = 1;
        }
      }
      if (applied < pending_tensors.size()) {
        memory.Try(r, result.keep, &trial);
        memory.Apply(&trial);
        bounds.Forget();
      }
      if (verify) {
        memory.Try(r, result.keep, &verify_trial);
        const std::string difference =
            applied > 0 ? SimResultDifference(verify_trial.sim.full(), memory.part(r).sim.full())
                        : "";
        if (memory.peak() > pending_peak || memory.cost() - cost_before != pending_cost ||
            !difference.empty()) {
          throw std::logic_error("cleanup: " + std::to_string(pending_tensors.size()) +
                                 " pending re-saves were bounded by peak " +
                                 std::to_string(pending_peak) + " at added cost " +
                                 std::to_string(pending_cost) + " but come to peak " +
                                 std::to_string(memory.peak()) + ", added cost " +
                                 std::to_string(memory.cost() - cost_before) +
                                 (difference.empty() ? "" : "; the patches differ in " + difference));
        }
      }
      pending_tensors.clear();
    };
    for (const Gain& gain : gains) {
      const TensorId t = gain.tensor;
      const size_t r = memory.RegionOf(t);
      result.keep[t] = 1;
      double added_cost = 0;
      bool fits = false, pend = false;
      if (bounds.pending() != 0 && r == bounds.prepared()) {
        fits = bounds.JudgePending(result.keep, t, budget_bytes, &added_cost) ==
               ResaveBounds::Verdict::kFits;
        pend = fits;
        if (verify && fits) {
          // On top of the pending re-saves, which `memory` has not seen.
          memory.Try(r, result.keep, &verify_trial);
          if (verify_trial.peak > budget_bytes ||
              verify_trial.added_cost != bounds.pending_cost() + added_cost) {
            throw std::logic_error("cleanup: re-saving '" + graph.tensors[t].name +
                                   "' on top of pending re-saves was judged to fit at added "
                                   "cost " + std::to_string(added_cost) +
                                   " but simulates to peak " + std::to_string(verify_trial.peak) +
                                   " (budget " + std::to_string(budget_bytes) + ")");
          }
        }
      }
      if (!pend) {
        result.keep[t] = 0;
        flush();
        result.keep[t] = 1;
        fits = try_resave(t, /*need_sim=*/true, &added_cost);
        pend = fits && bounds.CanPend();
      }
      // Keep a re-save only if it still fits and does not add recompute
      // (re-saving can only remove recompute steps, so this guards ties).
      if (!fits || added_cost > 0) {
        result.keep[t] = 0;
        continue;
      }
      if (spdlog::should_log(spdlog::level::debug)) {  // ShowName costs a string
        spdlog::debug("cleanup: re-save '{}' (cost {:+})", ShowName(graph.tensors[t].name),
                      added_cost);
      }
      result.resaved.push_back(t);
      region_changed[r] = 1;
      ++version[r];
      if (pend) {
        bounds.Pend();
        pending_tensors.push_back(t);
        ++pended;
      } else {
        memory.Apply(&trial);
        if (trial_patched) {
          bounds.ForgetPatched(r);
        } else {
          bounds.Forget(r);
        }
      }
      changed = true;
      if (cleanup_options.stop && cleanup_options.stop(result.keep)) {
        result.stopped = true;
        break;
      }
    }
    if (result.stopped) {
      spdlog::debug("cleanup: stopped after {} re-saves", result.resaved.size());
      return result;
    }
    flush();
  }
  // The regions' figures are the step's (exactly: see RegionalMemory).
  result.peak_after = memory.peak();
  result.scored = scored;
  result.pended = pended;
  result.patched = patched;
  result.caught_up_by_patches = patched_up;
  result.cost_after = memory.cost();
  spdlog::info("cleanup: {} re-saved in {} rounds, recompute cost {} -> {}, peak {} -> {} bytes; "
               "{} re-saves tried ({} answered by a copy of the region), {} ruled out by a floor, "
               "{} ranked by a ceiling, {} scored by DropDelta, {} known not to fit, {} applied "
               "without simulating ({} catch-ups, {} re-saves caught up by patches), {} patched "
               "({:.3f} s)",
               result.resaved.size(), rounds, result.cost_before, result.cost_after,
               result.peak_before, result.peak_after, tried, memory.shared_trials(), floored,
               ceilinged, scored, known, pended, caught_up, patched_up, patched,
               SecondsSince(started));
  return result;
}

}  // namespace ckptplan
