// DropDelta::Patch: the simulation after one drop, from the simulation
// before it and what DropDelta::Score worked out, without simulating.
//
// Score finds where the drop's chain runs (before old step a), the old steps
// that go (pulled nodes' re-runs), the storages the chain makes and the old
// storages whose last read moves, and the range changes those make to the
// bytes live at each position. Patch writes them out: the steps in their new
// order, each old step's total moved by the changes over it and each chain
// step's total from what lives across its place (as Score's maxima), and
// the storages in the order Simulate makes them (PatchResave writes a
// re-save out the same way). Node peaks and the peak come
// from the totals through Simulate's PeakTracker, the categories of storages
// whose last read moves through its ForwardStorageCategory (simulator.h). It
// restates no clause of the memory rule Score does not:
// tests/sim/drop_patch_test.cc compares every patch with a simulation field
// by field, and the incremental planner's verify mode simulates every drop
// it applies from a patch.
#include "ckptplan/sim/drop_delta.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace ckptplan {
namespace {

// Old steps [s, s + length), at `steps_from` and `totals_from` (node peaks
// in `old_node_peak`), each total moved by `delta`, written from new step n
// on and summed as a run (PeakTracker::CopyRun); the part before old step
// `own_end` (the range's leading forward steps: each its node's only step,
// node first + s) by CopyOwnRun.
void CopyRun(const Step* steps_from, const int64_t* totals_from, const int64_t* old_node_peak,
             uint32_t s, uint32_t length, int64_t delta, uint32_t n, uint32_t own_end, Step* steps,
             int64_t* totals, PeakTracker* peaks) {
  const uint32_t own = s < own_end ? std::min(length, own_end - s) : 0;
  peaks->CopyOwnRun(n, steps_from, totals_from, own, delta, steps + n, totals + n);
  peaks->CopyRun(n + own, steps_from + own, totals_from + own, length - own, old_node_peak, delta,
                 steps + n + own, totals + n + own);
}

// Storages [from, from + count) copied to `to`, each first and last step at
// or after `place` moved by `length`; with kBackwards, from the last storage
// back, so that `to` may overlap `from` at a higher address (storages moved up
// where they are). Where the compiler has vector types, a storage is one
// four-lane vector (root, first step, last step, the category's word):
// compare, mask and add per storage instead of two branches and a repacked
// store.
template <bool kBackwards = false>
void ShiftSteps(const Buffer* from, uint32_t count, uint32_t place, uint32_t length, Buffer* to) {
#if defined(__GNUC__)
  typedef uint32_t Lanes __attribute__((vector_size(16)));
  static_assert(sizeof(Buffer) == sizeof(Lanes) && offsetof(Buffer, first_step) == 4 &&
                offsetof(Buffer, last_step) == 8);
  const Lanes at = {0, place, place, 0};
  const Lanes by = {0, length, length, 0};
#endif
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t i = kBackwards ? count - 1 - k : k;
#if defined(__GNUC__)
    Lanes lanes;
    std::memcpy(&lanes, from + i, sizeof(lanes));
    lanes += reinterpret_cast<Lanes>(lanes >= at) & by;
    std::memcpy(to + i, &lanes, sizeof(lanes));
#else
    Buffer copy = from[i];
    copy.first_step += copy.first_step >= place ? length : 0;
    copy.last_step += copy.last_step >= place ? length : 0;
    to[i] = copy;
#endif
  }
}

// Storages patched where they are where no step goes and none is removed
// (PatchInPlace): those from `inserted` on move up by the chain's storages
// `made`, written between; every first and last step at or after `place`
// moves by `length` (the storages before `inserted` were made before it:
// only their last steps may).
void InsertShifted(uint32_t inserted, const std::vector<Buffer>& made, uint32_t place,
                   uint32_t length, std::vector<Buffer>* buffers) {
  const uint32_t old_size = static_cast<uint32_t>(buffers->size());
  ReserveSteps(*buffers, old_size + made.size());
  buffers->resize(old_size + made.size());
  Buffer* const data = buffers->data();
  ShiftSteps</*kBackwards=*/true>(data + inserted, old_size - inserted, place, length,
                                   data + inserted + made.size());
  std::copy(made.begin(), made.end(), data + inserted);
  ShiftSteps(data, inserted, place, length, data);
}

// ShiftSteps where old steps [first_gone, last_gone] hold the `gone` steps
// that go (sorted; first_gone is the first of them, last_gone the last):
// a step after the last moves back by their count. A storage with a step
// among [first_gone, last_gone] is mapped by `map` (StepMap: a step that
// goes is kNone), which counts the storages made at a step that goes in
// *made_gone and those last read at one in *read_gone.
template <typename Map>
void MapSteps(const Buffer* from, uint32_t count, uint32_t place, uint32_t length,
              uint32_t first_gone, uint32_t last_gone, uint32_t gone, const Map& map, Buffer* to,
              size_t* made_gone, size_t* read_gone) {
  // Storage i through `map`, one step at a time.
  auto map_one = [&](uint32_t i) {
    Buffer copy = from[i];
    copy.first_step = map(copy.first_step);
    copy.last_step = map(copy.last_step);
    *made_gone += copy.first_step == StepFacts::kNone;
    *read_gone += copy.last_step == StepFacts::kNone;
    to[i] = copy;
  };
#if defined(__GNUC__)
  typedef uint32_t Lanes __attribute__((vector_size(16)));
  const Lanes at = {UINT32_MAX, place, place, UINT32_MAX};
  const Lanes by = {0, length, length, 0};
  const Lanes lo = {UINT32_MAX, first_gone, first_gone, UINT32_MAX};
  const Lanes hi = {UINT32_MAX, last_gone, last_gone, UINT32_MAX};
  const Lanes back = {0, gone, gone, 0};
  for (uint32_t i = 0; i < count; ++i) {
    Lanes lanes;
    std::memcpy(&lanes, from + i, sizeof(lanes));
    const Lanes inside = reinterpret_cast<Lanes>(lanes >= lo) & reinterpret_cast<Lanes>(lanes <= hi);
    if ((inside[1] | inside[2]) != 0) {
      map_one(i);
      continue;
    }
    lanes += (reinterpret_cast<Lanes>(lanes >= at) & by) - (reinterpret_cast<Lanes>(lanes > hi) & back);
    std::memcpy(to + i, &lanes, sizeof(lanes));
  }
#else
  (void)place, (void)length, (void)first_gone, (void)last_gone, (void)gone;
  for (uint32_t i = 0; i < count; ++i) map_one(i);
#endif
}

}  // namespace

bool DropDelta::SameRange(const SimOptions& options, const SimResult* out) const {
  const NodeId end = std::min<size_t>(options.end_node, context_.graph.nodes.size());
  const NodeId first = std::min(options.first_node, end);
  return !options.record_details && !options.record_categories &&
         options.approx_options == nullptr && first == first_ && end == end_ && out != sim_;
}

void DropDelta::SizeSteps(uint32_t num_steps, SimResult* out) {
  ReserveSteps(out->steps, num_steps);
  out->steps.resize(num_steps);
  ReserveSteps(out->total, num_steps);
  out->total.resize(num_steps);
}

void DropDelta::FinishPatch(double added_cost, SimResult* out) const {
  const SimResult& sim = *sim_;
  out->by_category.clear();
  out->recomputes.clear();
  // Costs are exact (Score answers only then): any order of sums is equal.
  out->recompute_cost = sim.recompute_cost + added_cost;
  out->step_cost = sim.step_cost;
  out->resident = sim.resident;
  out->peak_breakdown = {};
}

bool DropDelta::MoveLastRead(uint32_t last_step, const Step& last_read, Buffer* buffer) const {
  buffer->last_step = last_step;
  if (buffer->category == Category::kGradients) return false;
  const NodeId reader = context_.last_reader[buffer->root];
  if (!whole_ && reader != kNoId && reader >= end_) return false;  // lives to the end
  if ((buffer->category == Category::kTemporaries ||
       buffer->category == Category::kSavedActivations) &&
      context_.forward_produced[buffer->root]) {
    buffer->category = ForwardStorageCategory(context_, last_read);
  }
  return true;
}

bool DropDelta::Patch(TensorId t, const SimOptions& options, SimResult* out) {
  return PatchDrop(t, options, out, /*in_place=*/false);
}

bool DropDelta::PatchInPlace(TensorId t, const SimOptions& options, SimResult* sim) {
  return sim != nullptr && sim == sim_ && PatchDrop(t, options, sim, /*in_place=*/true);
}

// Patch, or in place (*out is then the indexed simulation): there all that
// may answer false is worked out before the simulation changes (the
// storages, into buffers_, swapped in at the end; the group changes), the
// steps before the group of the first old step that changes are not
// visited (their totals, node peaks and the figures over them stay), and
// the old steps from the chain's place on are first moved up by its length
// in their arrays and read from there: each old step is read before a step
// after the drop is written over it (a step goes to the same place or an
// earlier one).
bool DropDelta::PatchDrop(TensorId t, const SimOptions& options, SimResult* out, bool in_place) {
  patched_prefix_ = {};
  const NodeId end = end_, first = first_;
  // (In place, out is the indexed simulation, which SameRange refuses as a
  // second one's target: only the options are asked.)
  if (!SameRange(options, in_place ? nullptr : out)) return false;
  // What Score worked out is kept until the next flip is scored: where the
  // last one scored was this drop (most often the search's only score), it
  // is not scored again. A score cut short left the same (CutAtTop comes
  // after the chain, changes and storages are worked out).
  if (scored_.tensor != t && !Score(t).known) return false;
  const SimResult& sim = *sim_;  // *out, in place
  const int64_t a = scored_.a;
  const int64_t m = static_cast<int64_t>(chain_.size());
  const uint32_t num_old = static_cast<uint32_t>(sim.steps.size());
  // A by-product's drop adds no step (its place is past the old steps).
  if (m == 0 ? a != num_old : a >= num_old) return false;
  auto block_key = [&](int64_t k) { return (a << kKeyShift) | k; };

  // The changes as running sums: over old steps (events_) and over the
  // chain's steps (chain_events_).
  SortedOldStepEvents();
  ChainEvents(a, m);
  // What lives across the place of the chain (Score's `across` less the offset).
  const int64_t across = m == 0 ? 0 : Across(static_cast<uint32_t>(a));
  const uint32_t num_new = num_old + static_cast<uint32_t>(m) -
                           static_cast<uint32_t>(deleted_.size());
  const StepMap new_step{static_cast<uint32_t>(a), static_cast<uint32_t>(m), &deleted_};
  // A position's step after the drop; kNone for a step that goes.
  auto step_at = [&](int64_t position) -> uint32_t {
    if ((position & kKeyMask) == kKeyHalf) {
      return new_step(static_cast<uint32_t>(position >> kKeyShift));
    }
    const int64_t k = position & kKeyMask;
    if ((position >> kKeyShift) != a || k >= m) return kNone;
    return static_cast<uint32_t>(a + k);
  };
  // The step at a position step_at places (read before any step moves).
  auto step_of = [&](int64_t position) -> Step {
    if ((position & kKeyMask) == kKeyHalf) return sim.steps[position >> kKeyShift];
    Step step{};
    step.node = chain_[position & kKeyMask];
    step.recompute = true;
    return step;
  };

  // Storages in the order Simulate makes them: the old ones made before the
  // chain, the chain's (in its order, each step's outputs in order), the
  // old ones made after it but for the moved copies (made at steps that go).
  const uint32_t num_buffers = static_cast<uint32_t>(sim.buffers.size());
  const uint32_t inserted = MadeFrom(static_cast<uint32_t>(a));
  if (moved_.size() > num_buffers) return false;
  // The chain's storages, each written where `add` says (nullptr: no room);
  // false where they are not those Score found.
  auto add_chain_buffers = [&](auto add) {
    size_t made = 0;
    for (int64_t k = 0; k < m; ++k) {
      const NodeId p = chain_[k];
      for (uint32_t i = context_.outputs_begin[p]; i < context_.inputs_begin[p + 1]; ++i) {
        const TensorId x = context_.ids[i];
        if (context_.made[x] != SimContext::Made::kActivation) continue;
        if (made == made_.size() || made_[made].first != block_key(k)) return false;
        Buffer* buffer = add();
        if (buffer == nullptr) return false;
        buffer->root = x;
        buffer->category = Category::kRecomputed;
        buffer->first_step = static_cast<uint32_t>(a + k);
        buffer->last_step = step_at(made_[made].last);
        if (buffer->last_step == kNone) return false;
        ++made;
      }
    }
    return made == made_.size();
  };
  // An old storage's last read moved to `position`, with its category.
  auto move_lifetime = [&](int64_t position, Buffer* buffer) {
    const uint32_t last = step_at(position);
    return last != kNone && MoveLastRead(last, step_of(position), buffer);
  };
  // In place where no step goes, the storages are patched where they are
  // once the steps are (InsertShifted); what that writes besides moving
  // them is worked out here, as all that may answer false must be before
  // anything is written. Else, in place, into buffers_, swapped in once the
  // steps are (each keeps the other's capacity).
  const bool buffers_in_place = in_place && deleted_.empty() && moved_.empty();
  if (buffers_in_place) {
    chain_buffers_.clear();
    if (!add_chain_buffers([&]() { return &chain_buffers_.emplace_back(); })) return false;
    moved_lifetimes_.clear();
    for (const auto& [b, position] : lifetimes_) {
      if (b >= num_buffers) return false;
      Buffer buffer = sim.buffers[b];
      buffer.first_step = new_step(buffer.first_step);
      buffer.last_step = new_step(buffer.last_step);
      if (!move_lifetime(position, &buffer)) return false;
      moved_lifetimes_.emplace_back(b < inserted ? b : b + made_.size(), buffer);
    }
  } else {
    std::vector<Buffer>& buffers_out = in_place ? buffers_ : out->buffers;
    // Written through a pointer, the vector sized first: its end is not
    // stored back at every storage (most of the patch's storages are copies).
    const size_t num_new_buffers = num_buffers + made_.size() - moved_.size();
    buffers_out.resize(num_new_buffers);
    Buffer* const new_buffers = buffers_out.data();
    size_t written = 0;
    size_t unsettled = 0;  // old storages last read at a step that goes
    // Old storages [lo, hi) copied with their steps mapped, in one loop; with
    // `made_here`, each must be made at a step that stays.
    auto copy_old = [&](uint32_t lo, uint32_t hi, bool made_here) {
      if (hi < lo || written + (hi - lo) > num_new_buffers) return false;
      const Buffer* const from = sim.buffers.data() + lo;
      Buffer* const to = new_buffers + written;
      if (deleted_.empty()) {
        // No step goes: each step from the chain's place on moves by its
        // length (StepMap's first branch, written out: through StepMap the
        // loop keeps its branch, and the 693-layer greedy at 80% took 1.64
        // s against 1.54, median of 5 alternating).
        const uint32_t place = static_cast<uint32_t>(a), length = static_cast<uint32_t>(m);
        ShiftSteps(from, hi - lo, place, length, to);
        written += hi - lo;
        return true;
      }
      size_t lost = 0, gone = 0;
      MapSteps(from, hi - lo, static_cast<uint32_t>(a), static_cast<uint32_t>(m),
               new_step.first_gone, new_step.last_gone, static_cast<uint32_t>(deleted_.size()),
               new_step, to, &gone, &lost);
      written += hi - lo;
      unsettled += lost;
      return !made_here || gone == 0;
    };
    if (!copy_old(0, inserted, /*made_here=*/false)) return false;
    if (!add_chain_buffers([&]() -> Buffer* {
          return written < num_new_buffers ? &new_buffers[written++] : nullptr;
        })) {
      return false;
    }
    // The old storages made after the place but for the moved copies (made at
    // steps that go), in runs between those.
    uint32_t next = inserted;
    for (const uint32_t b : moved_) {
      if (b < next || b >= num_buffers || new_step(sim.buffers[b].first_step) != kNone) return false;
      if (!copy_old(next, b, /*made_here=*/true)) return false;
      next = b + 1;
    }
    if (!copy_old(next, num_buffers, /*made_here=*/true)) return false;
    if (written != num_new_buffers) return false;
    // The old storages whose last read moves, and their categories from the
    // new last read (ForwardStorageCategory, as Simulate settles them).
    for (const auto& [b, position] : lifetimes_) {
      const Buffer& old = sim.buffers[b];
      if (new_step(old.first_step) == kNone) return false;
      const size_t index =
          b < inserted ? b
                       : b + made_.size() -
                             (std::lower_bound(moved_.begin(), moved_.end(), b) - moved_.begin());
      Buffer& buffer = buffers_out[index];
      unsettled -= buffer.last_step == kNone;
      if (!move_lifetime(position, &buffer)) return false;
    }
    if (unsettled != 0) return false;  // a read that goes, not placed by Score
  }
  // Read off the old steps, through the facts of the indexed simulation.
  const uint32_t place = static_cast<uint32_t>(a);
  FindGroupChanges(&place, m == 0 ? 0 : 1);

  // Steps, totals and node peaks, in runs of old steps between the places
  // where something changes (an event of the running sum, a step that goes,
  // the chain). A recompute step starts a chain unless the step before it
  // is a recompute step of the same chain: chains are named by their old
  // first step, t's own chain by kNewChain (or, run inside one, by that
  // chain's name). Inside a run each old step follows the old step it
  // followed before, so its starts_chain stays as it was.
  constexpr uint32_t kNewChain = kNone - 1;
  uint32_t from = 0;   // the first old step visited (and new step written)
  uint32_t shift = 0;  // where old steps from the place on are read: moved up so
  // In place, the highest node peak of the groups before `from`, none of
  // which changes: their steps' totals are no higher.
  int64_t prefix_most = std::numeric_limits<int64_t>::min();
  if (in_place) {
    // The first old step a change reaches, and its group's first step: the
    // steps before are as they were, and so are their groups' node peaks.
    uint32_t changed = static_cast<uint32_t>(a);
    if (!events_.empty()) {
      changed = static_cast<uint32_t>(std::min<int64_t>(changed, events_.front().first));
    }
    if (!deleted_.empty()) changed = std::min(changed, deleted_.front());
    from = changed < num_old ? facts_->GroupBegin(facts_->Group(changed)) : num_old;
    if (from > 0) {
      ++kept_prefixes_;
      const NodeId groups = (from < num_old ? facts_->Group(from) : end) - first;
      if (group_max_ != nullptr) {
        prefix_most = group_max_->PrefixMax(groups);
      } else {
        for (NodeId n = 0; n < groups; ++n) prefix_most = std::max(prefix_most, sim.node_peak[n]);
      }
    }
    shift = static_cast<uint32_t>(m);
    SizeSteps(num_old + shift, out);
    std::memmove(out->steps.data() + a + shift, out->steps.data() + a,
                 (num_old - a) * sizeof(Step));
    std::memmove(out->total.data() + a + shift, out->total.data() + a,
                 (num_old - a) * sizeof(int64_t));
  } else {
    SizeSteps(num_new, out);
  }
  Step* const steps = out->steps.data();
  int64_t* const totals = out->total.data();
  PeakTracker peaks(out, first, end, 0);
  peaks.StartAt(from);
  // Where old step s is read: the indexed simulation, or (in place) the
  // arrays written, moved up by `shift` from the place on.
  const Step* const old_steps = in_place ? steps : sim.steps.data();
  const int64_t* const old_totals = in_place ? totals : sim.total.data();
  const int64_t* const old_node_peak = sim.node_peak.data();
  auto old_at = [&](uint32_t s) { return s + (s >= a ? shift : 0); };
  uint32_t n = from;                // the next step after the drop
  uint32_t kept_tail = kNone;       // SimPrefix::tail
  uint32_t previous_chain = kNone;  // of the step emitted last; kNone: not a recompute step
  auto emit = [&](NodeId node, bool recompute, uint32_t chain, int64_t total) {
    Step& step = steps[n];
    step.node = node;
    step.recompute = recompute;
    step.starts_chain = recompute && chain != previous_chain;
    previous_chain = recompute ? chain : kNone;
    totals[n] = total;
    peaks.Add(n, step, total);
    ++n;
  };
  size_t event = 0, deleted = 0;
  int64_t running = 0;
  uint32_t old_chain = kNone;  // the chain of the old step at hand
  for (uint32_t s = from; s <= num_old;) {
    if (s == a) {
      const uint32_t chain = scored_.inside ? scored_.chain_begin : kNewChain;
      int64_t chain_running = 0;
      for (int64_t k = 0; k < m; ++k) {
        chain_running += chain_events_[k];
        const NodeId node = chain_[k];
        emit(node, true, chain,
             across + chain_running + std::max<int64_t>(context_.node_workspace[node], 0));
      }
    }
    if (s == num_old) break;
    for (; event < events_.size() && events_[event].first <= s; ++event) {
      running += events_[event].second;
    }
    const Step old = old_steps[old_at(s)];
    if (old.starts_chain) old_chain = s;
    if (deleted < deleted_.size() && deleted_[deleted] == s) {
      ++deleted;
      ++s;
      continue;
    }
    emit(old.node, old.recompute, old_chain, old_totals[old_at(s)] + running);
    // The run after s: up to the next event, step that goes or the chain.
    uint32_t stop = num_old;
    if (event < events_.size()) {
      stop = static_cast<uint32_t>(std::min<int64_t>(stop, events_[event].first));
    }
    if (deleted < deleted_.size()) stop = std::min(stop, deleted_[deleted]);
    if (a > s) stop = std::min<uint32_t>(stop, static_cast<uint32_t>(a));
    ++s;
    if (stop <= s) continue;
    const uint32_t length = stop - s;
    if (in_place && running == 0 && (n == old_at(s) || stop == num_old)) {
      // A run the patch leaves as it was (most often the steps after the
      // drop's last change): its groups' node peaks stay. Where steps went
      // before it (the last run only), it moves down to its place.
      if (n != old_at(s)) {
        std::memmove(steps + n, steps + old_at(s), length * sizeof(Step));
        std::memmove(totals + n, totals + old_at(s), length * sizeof(int64_t));
      }
      bool read = false;
      const uint32_t head = peaks.KeepRun(n, length, steps + n, totals + n, group_max_, &read);
      ++kept_runs_;
      read_kept_runs_ += read;
      if (stop == num_old && !steps[n + head - 1].recompute) {
        // The groups after the run's first own step are the old ones, moved
        // by the chain's length less the steps that went.
        kept_tail = n + head;
      }
    } else {
      CopyRun(old_steps + old_at(s), old_totals + old_at(s), old_node_peak, s, length, running,
              n, forward_steps_, steps, totals, &peaks);
    }
    // The chain of the run's last step, if a recompute step (inside the run,
    // a step whose chain went on was not an own step's).
    for (uint32_t i = length; i-- > 0 && steps[n + i].recompute;) {
      if (steps[n + i].starts_chain) {
        old_chain = s + i;
        break;
      }
    }
    previous_chain = steps[n + length - 1].recompute ? old_chain : kNone;
    n += length;
    s = stop;
  }
  if (n != num_new || deleted != deleted_.size()) {
    if (in_place) {
      throw std::logic_error("DropDelta: the patch in place of dropping '" +
                             context_.graph.tensors[t].name + "' placed " + std::to_string(n) +
                             " steps of " + std::to_string(num_new));
    }
    return false;
  }
  if (in_place) {
    out->steps.resize(num_new);
    out->total.resize(num_new);
    if (buffers_in_place) {
      InsertShifted(inserted, chain_buffers_, static_cast<uint32_t>(a), static_cast<uint32_t>(m),
                    &out->buffers);
      for (const auto& [index, buffer] : moved_lifetimes_) out->buffers[index] = buffer;
    } else {
      out->buffers.swap(buffers_);
    }
    // The steps before `from` hold the first highest step, or own step,
    // only where their highest node peak reaches the highest of those
    // after: then their figures are summed again (seldom: the drop's
    // changes begin before the step's highest steps, most often).
    const bool peak_before = from > 0 && prefix_most >= peaks.peak();
    const bool own_before = from > 0 && prefix_most >= peaks.max_own();
    if (peak_before || own_before) {
      ++summed_prefixes_;
      int64_t peak = std::numeric_limits<int64_t>::min(), own = peak;
      uint32_t peak_step = 0;
      NodeId own_node = kNoId;
      for (uint32_t s = 0; s < from; ++s) {
        const int64_t total = totals[s];
        if (peak_before && (s == 0 || total > peak)) {
          peak = total;
          peak_step = s;
        }
        if (own_before && !steps[s].recompute && total > own) {
          own = total;
          own_node = steps[s].node;
        }
      }
      peaks.Before(peak, peak_step, own, own_node);
    }
  }

  peaks.Finish();
  FinishPatch(scored_.added_cost, out);
  // Steps before the chain's place and storages made before it are as they
  // were (steps that go come after it, as do their storages).
  patched_prefix_.steps = static_cast<uint32_t>(a);
  if (!deleted_.empty()) patched_prefix_.steps = std::min(patched_prefix_.steps, deleted_.front());
  patched_prefix_.buffers = inserted;
  if (!moved_.empty()) patched_prefix_.buffers = std::min(patched_prefix_.buffers, moved_.front());
  if (kept_tail != kNone && kept_tail >= patched_prefix_.steps) {
    patched_prefix_.tail = kept_tail;
    patched_prefix_.shift = m - static_cast<int64_t>(deleted_.size());
  }
  if (in_place) {
    // The index read the simulation as it was.
    sim_ = nullptr;
    scored_ = {};
    resaved_ = kNoId;
    events_sorted_ = false;
  }
  return true;
}

// What Patch or PatchResave did to each group's steps, read off the score's
// range changes over the old steps: a group every step of which a change
// covers moves by its bytes; one a change cuts, those of the old steps that
// new steps go before (`places`) and those losing a step are reset.
void DropDelta::FindGroupChanges(const uint32_t* places, size_t num_places) {
  const StepFacts& facts = *facts_;
  group_changes_.adds.clear();
  group_changes_.resets.clear();
  std::vector<uint32_t>& resets = group_changes_.resets;
  for (const Change& change : changes_) {
    int64_t lo, hi;
    if (!OldSteps(change, &lo, &hi)) continue;
    const uint32_t low = static_cast<uint32_t>(lo), high = static_cast<uint32_t>(hi);
    const NodeId g = facts.Group(low), h = facts.Group(high);
    NodeId from = g, to = h;  // whole groups [from, to]
    if (facts.GroupBegin(g) != low) {
      resets.push_back(g - first_);
      ++from;
    }
    if (facts.OwnStep(h) != high) {
      resets.push_back(h - first_);
      if (to == first_) continue;  // h is the first group: none whole
      --to;
    }
    if (from <= to) group_changes_.adds.push_back({from - first_, to - first_ + 1, change.bytes});
  }
  for (size_t i = 0; i < num_places; ++i) resets.push_back(facts.Group(places[i]) - first_);
  for (const uint32_t s : deleted_) resets.push_back(facts.Group(s) - first_);
}

void DropDelta::GroupChanges::ApplyTo(const std::vector<int64_t>& node_peak,
                                      RangeAddMax* tree) const {
  for (const Add& add : adds) tree->AddLater(add.lo, add.hi, add.bytes);
  for (const uint32_t n : resets) tree->SetLater(n, node_peak[n]);
  tree->RebuildDirty();
}

std::string DropDelta::GroupChanges::Mismatch(const RangeAddMax& tree,
                                             const std::vector<int64_t>& node_peak,
                                             const Graph& graph, NodeId first) {
  size_t n = 0;
  while (n < node_peak.size() && tree.Get(n) == node_peak[n]) ++n;
  if (n == node_peak.size()) return "";
  return "the node peak of '" + graph.nodes[first + n].name + "' moved by the patch is " +
         std::to_string(tree.Get(n)) + ", its simulation's " + std::to_string(node_peak[n]);
}

// The re-save's patch: the steps that go are one run (deleted_, or none:
// the steps stay), and the nodes of the run that make what is read after
// it, if any (MovedChain: chain_, moved_keys_, moved_starts_), re-run in
// chains of their own before its later readers, making their storages
// there (made_). Like a drop's patch with the chain in several places: old
// steps keep their order and chains, each moved step's total is what lives
// across its place plus the changes over its key, and the storages come in
// the order of their new first steps (the run's own go with it). Moved
// nodes inside a later chain's replay are not written out.
bool DropDelta::PatchResave(TensorId t, const SimOptions& options, SimResult* out) {
  patched_prefix_ = {};
  if (!SameRange(options, out)) return false;
  // As Patch: not scored again where it was the last flip scored (a known
  // ScoreResave leaves resaved_ at t).
  if (resaved_ != t) ScoreResave(t);
  if (resaved_ != t) return false;
  const SimResult& sim = *sim_;
  const uint32_t num_old = static_cast<uint32_t>(sim.steps.size());
  // Moved nodes' keys, chain starts and storages are MovedChain's, read
  // only where it moved some (chain_).
  const size_t m = chain_.size();
  if (m > 0 && (moved_replayed_ || deleted_.empty() || moved_starts_.size() != m ||
                moved_keys_.size() != m || moved_total_.size() != m ||
                !std::is_sorted(moved_keys_.begin(), moved_keys_.end()))) {
    return false;
  }
  const uint32_t gone_first = deleted_.empty() ? num_old : deleted_.front();
  const uint32_t gone_end = deleted_.empty() ? num_old : deleted_.back() + 1;
  if (gone_end - gone_first != deleted_.size()) return false;
  auto place_of = [&](size_t j) { return static_cast<uint32_t>(moved_keys_[j] >> kKeyShift); };
  // Each place past the run, before an old step that does not go on a chain.
  for (size_t j = 0; j < m; ++j) {
    const uint32_t place = place_of(j);
    if (place <= gone_end || place >= num_old) return false;
    if (sim.steps[place].recompute && !sim.steps[place].starts_chain) return false;
    if (!moved_starts_[j] && (j == 0 || place_of(j - 1) != place)) return false;
  }
  auto moved = [&](NodeId node) {
    return std::find(chain_.begin(), chain_.end(), node) != chain_.end();
  };
  // What the steps that go made is read after them only as t, or is remade
  // by a moved node.
  for (uint32_t s = gone_first; s < gone_end; ++s) {
    const NodeId node = sim.steps[s].node;
    if (moved(node)) continue;
    for (uint32_t i = context_.outputs_begin[node]; i < context_.inputs_begin[node + 1]; ++i) {
      const TensorId x = context_.ids[i];
      if (x == t || !context_.Unsaved(x, *keep_)) {
        continue;
      }
      const uint32_t use = facts_->LastUse(x);
      if (use != kNone && use >= gone_end) return false;
    }
  }
  SortedOldStepEvents();

  // Steps and totals.
  const uint32_t num_new =
      num_old - static_cast<uint32_t>(deleted_.size()) + static_cast<uint32_t>(m);
  SizeSteps(num_new, out);
  Step* const steps = out->steps.data();
  int64_t* const totals = out->total.data();
  PeakTracker peaks(out, first_, end_, 0);
  // An old step's index after the re-save: the steps before the run stay,
  // the run's go (kNone), and each later one moves back by the run's length
  // and on by the moved steps placed at or before it (emitted before it).
  const int64_t* const keys = moved_keys_.data();  // m of them (by value below: no reloads)
  auto new_step = [gone_first, gone_end, keys, m](uint32_t s) -> uint32_t {
    if (s < gone_first) return s;
    if (s < gone_end) return kNone;
    uint32_t moved_before = 0;
    if (m > 0) {
      moved_before = static_cast<uint32_t>(
          std::partition_point(keys, keys + m,
                               [s](int64_t key) { return (key >> kKeyShift) <= s; }) -
          keys);
    }
    return s - (gone_end - gone_first) + moved_before;
  };
  std::vector<uint32_t>& moved_step = moved_step_;  // per moved step, its index after
  moved_step.assign(m, kNone);
  uint32_t kept_tail = kNone;  // SimPrefix::tail
  size_t event = 0, j = 0;
  int64_t running = 0;
  uint32_t n = 0;
  auto emit = [&](const Step& step, int64_t total) {
    steps[n] = step;
    totals[n] = total;
    peaks.Add(n, step, total);
    return n++;
  };
  // In runs of old steps between the places where something changes (an
  // event of the running sum, the run that goes, a moved step's place), as
  // in Patch.
  for (uint32_t s = 0; s < num_old;) {
    for (; j < m && place_of(j) == s; ++j) {
      Step step;
      step.node = chain_[j];
      step.recompute = true;
      step.starts_chain = moved_starts_[j] != 0;
      moved_step[j] = emit(step, moved_total_[j]);
    }
    if (s >= gone_first && s < gone_end) {
      s = gone_end;
      continue;
    }
    for (; event < events_.size() && events_[event].first <= s; ++event) {
      running += events_[event].second;
    }
    Step step = sim.steps[s];
    // A recompute step right after the run starts a chain where the run
    // started one (the step before the run is not of the same chain).
    if (s == gone_end && step.recompute) step.starts_chain |= sim.steps[gone_first].starts_chain;
    if (emit(step, sim.total[s] + running) != new_step(s)) return false;
    uint32_t stop = num_old;
    if (event < events_.size()) {
      stop = static_cast<uint32_t>(std::min<int64_t>(stop, events_[event].first));
    }
    if (j < m) stop = std::min(stop, place_of(j));
    if (gone_first > s) stop = std::min(stop, gone_first);
    ++s;
    if (stop <= s) continue;
    const uint32_t length = stop - s;
    CopyRun(sim.steps.data() + s, sim.total.data() + s, sim.node_peak.data(), s, length, running,
            n, forward_steps_, steps, totals, &peaks);
    if (stop == num_old && running == 0) {
      // The last run, copied as it was: the groups after its first own
      // step are the old ones, moved by the moved steps less the run that
      // went (SimPrefix::tail).
      const uint32_t own = static_cast<uint32_t>(
          std::find_if(steps + n, steps + n + length, [](const Step& x) { return !x.recompute; }) -
          steps);
      if (own < n + length) kept_tail = own + 1;
    }
    n += length;
    s = stop;
  }
  if (n != num_new || j != m) return false;
  // A position's step after the re-save; kNone for one that goes.
  auto step_at = [&](int64_t position) -> uint32_t {
    if ((position & kKeyMask) == kKeyHalf) {
      return new_step(static_cast<uint32_t>(position >> kKeyShift));
    }
    if (m == 0) return kNone;
    auto it = std::lower_bound(moved_keys_.begin(), moved_keys_.end(), position);
    if (it == moved_keys_.end() || *it != position) return kNone;
    return moved_step[it - moved_keys_.begin()];
  };

  // Storages, in the order of their first steps: the old ones but those the
  // run made, and the moved nodes' (made_, by key and then as made before).
  std::vector<uint32_t>& order = made_order_;
  order.resize(m > 0 ? made_.size() : 0);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    if (made_[x].first != made_[y].first) return made_[x].first < made_[y].first;
    return made_[x].moved < made_[y].moved;
  });
  // The old storages that go, made by the run (storages are in the order
  // of their first steps): [gone_lo, gone_hi).
  const uint32_t num_buffers = static_cast<uint32_t>(sim.buffers.size());
  const uint32_t gone_lo = MadeFrom(gone_first), gone_hi = MadeFrom(gone_end);
  out->buffers.resize(num_buffers - (gone_hi - gone_lo) + order.size());
  Buffer* const new_buffers = out->buffers.data();
  std::vector<uint32_t>& index = buffer_index_;  // per old storage, its index after; kNone: goes
  index.resize(num_buffers);
  std::fill(index.begin() + gone_lo, index.begin() + gone_hi, kNone);
  size_t unsettled = 0, written = 0;
  uint32_t b = 0;  // the next old storage
  // The old storages from b on whose first step after is before `limit`.
  // (The counts and pointers are locals in the loop: stores through the
  // arrays would otherwise reload them at every storage.)
  auto copy_old = [&](uint32_t limit) {
    uint32_t* const index_of = index.data();
    while (b < num_buffers) {
      if (b == gone_lo) b = gone_hi;
      const uint32_t run_end = b < gone_lo ? gone_lo : num_buffers;
      const Buffer* const from = sim.buffers.data() + b;
      uint32_t* const to_index = index_of + b;
      Buffer* const to = new_buffers + written;
      size_t lost = 0;
      uint32_t i = 0;
      for (const uint32_t count = run_end - b; i < count; ++i) {
        Buffer copy = from[i];
        copy.first_step = new_step(copy.first_step);
        if (copy.first_step >= limit) break;
        copy.last_step = new_step(copy.last_step);
        lost += copy.last_step == kNone;
        to_index[i] = static_cast<uint32_t>(written + i);
        to[i] = copy;
      }
      unsettled += lost;
      written += i;
      b += i;
      if (b < run_end) return;
    }
  };
  for (const uint32_t o : order) {
    const NewBuffer& made = made_[o];
    const uint32_t first_step = step_at(made.first);
    if (first_step == kNone) return false;
    copy_old(first_step);
    if (written == out->buffers.size()) return false;
    Buffer& buffer = new_buffers[written++];
    buffer.root = sim.buffers[made.moved].root;
    buffer.category = Category::kRecomputed;
    buffer.first_step = first_step;
    buffer.last_step = step_at(made.last);
    if (buffer.last_step == kNone) return false;
  }
  copy_old(kNone);
  if (b != num_buffers || written != out->buffers.size()) return false;
  for (const auto& [b, position] : lifetimes_) {
    if (index[b] == kNone) return false;
    Buffer& buffer = out->buffers[index[b]];
    unsettled -= buffer.last_step == kNone;
    const uint32_t last = step_at(position);
    if (last == kNone || !MoveLastRead(last, out->steps[last], &buffer)) return false;
  }
  if (unsettled != 0) return false;

  peaks.Finish();
  FinishPatch(resaved_cost_, out);
  // Steps before the run that goes are as they were (the moved steps come
  // in after it), as are the storages made before them.
  patched_prefix_.steps = gone_first;
  patched_prefix_.buffers = gone_lo;
  if (kept_tail != kNone && kept_tail >= gone_first) {
    patched_prefix_.tail = kept_tail;
    patched_prefix_.shift = static_cast<int64_t>(m) - static_cast<int64_t>(deleted_.size());
  }
  places_.resize(m);  // the moved chains' places, as old steps
  for (size_t j = 0; j < m; ++j) places_[j] = place_of(j);
  FindGroupChanges(places_.data(), m);
  return true;
}

std::string SimResultDifference(const SimResult& a, const SimResult& b) {
  auto at = [](const char* what, size_t i) { return std::string(what) + " " + std::to_string(i); };
  if (a.steps.size() != b.steps.size()) return "step count";
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step &x = a.steps[i], &y = b.steps[i];
    if (x.node != y.node || x.recompute != y.recompute || x.starts_chain != y.starts_chain) {
      return at("step", i);
    }
  }
  if (a.buffers.size() != b.buffers.size()) return "storage count";
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer &x = a.buffers[i], &y = b.buffers[i];
    if (x.root != y.root || x.category != y.category || x.first_step != y.first_step ||
        x.last_step != y.last_step) {
      return at("storage", i);
    }
  }
  if (a.recomputes.size() != b.recomputes.size()) return "recompute count";
  for (size_t i = 0; i < a.recomputes.size(); ++i) {
    const Recompute &x = a.recomputes[i], &y = b.recomputes[i];
    if (x.tensor != y.tensor || x.chain != y.chain || x.cost != y.cost) return at("recompute", i);
  }
  for (size_t i = 0; i < a.total.size() && i < b.total.size(); ++i) {
    if (a.total[i] != b.total[i]) return at("total at step", i);
  }
  if (a.total.size() != b.total.size()) return "total count";
  for (size_t i = 0; i < a.node_peak.size() && i < b.node_peak.size(); ++i) {
    if (a.node_peak[i] != b.node_peak[i]) return at("node peak", i);
  }
  if (a.node_peak.size() != b.node_peak.size()) return "node peak count";
  if (a.by_category != b.by_category) return "categories by step";
  if (a.peak_bytes != b.peak_bytes) return "peak";
  if (a.peak_step != b.peak_step) return "peak step";
  if (a.max_own_total != b.max_own_total || a.max_own_node != b.max_own_node) {
    return "highest own step";
  }
  if (a.recompute_cost != b.recompute_cost) return "recompute cost";
  if (a.step_cost != b.step_cost) return "step cost";
  if (a.resident != b.resident) return "resident bytes";
  if (a.peak_breakdown != b.peak_breakdown) return "peak breakdown";
  return "";
}

}  // namespace ckptplan
