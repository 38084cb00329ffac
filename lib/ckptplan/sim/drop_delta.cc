#include "ckptplan/sim/drop_delta.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace ckptplan {

DropDelta::DropDelta(const SimContext& context, const StepFacts* facts)
    : context_(context),
      own_facts_(facts ? nullptr : std::make_unique<StepFacts>(context)),
      facts_(facts ? facts : own_facts_.get()) {
  const size_t num_tensors = context.graph.tensors.size();
  mark_.assign(num_tensors, 0);
  ref_.assign(num_tensors, kNone);
  IndexRootReaders();
}

void DropDelta::Index(const SimResult& sim, const SaveSet& keep, NodeId first, NodeId end,
                      const std::vector<int64_t>* offset, const RangeAddMax* group_max) {
  if (own_facts_) {
    own_facts_->Fill(sim, first, end);
    own_facts_->FillReads();
    own_facts_->FillSaved(keep);
  } else if (facts_->sim() != &sim || facts_->first() != first || facts_->end() != end ||
             !facts_->saved_ready()) {
    throw std::logic_error("DropDelta: the shared StepFacts were not filled from this simulation");
  }
  sim_ = &sim;
  keep_ = &keep;
  first_ = first;
  end_ = end;
  whole_ = first == 0 && end == context_.graph.nodes.size();
  if (forward_range_ != std::make_pair(first, end)) {
    forward_range_ = {first, end};
    NodeId n = first;
    while (n < end && context_.node_forward[n]) ++n;
    forward_steps_ = n - first;
  }
  const StepFacts& facts = *facts_;
  const size_t num_steps = sim.steps.size();
  // Epochs only grow (Score), so entries of earlier indexes never match.
  if (pulled_.size() != end - first) pulled_.assign(end - first, 0);
  group_max_ = nullptr;
  all_max_ready_ = false;
  top_step_ = StepFacts::kNone;
  events_sorted_ = false;
  scored_.tensor = kNoId;  // no Patch nor PatchResave from an earlier index's score
  resaved_ = kNoId;
  if (group_max != nullptr) {
    if (offset != nullptr || group_max->size() != end - first) {
      throw std::logic_error("DropDelta: node peaks given for another range or with offsets");
    }
    group_max_ = group_max;
    offset_.clear();
  } else if (offset == nullptr) {
    offset_.clear();  // OffsetAt: 0
    value_.BuildOver(sim.total.data(), num_steps);  // `sim` outlives the scores
  } else {
    int64_t* value = value_.Reset(num_steps);
    offset_.resize(num_steps);
    int64_t group_offset = 0;
    for (size_t s = num_steps; s-- > 0;) {
      const Step& step = sim.steps[s];
      if (!step.recompute) group_offset = (*offset)[step.node - first];
      offset_[s] = group_offset;
      value[s] = sim.total[s] + group_offset;
      if (s + 1 == num_steps || value[s] >= value[top_step_]) top_step_ = static_cast<uint32_t>(s);
    }
    value_.Finish();
  }
  // Offsets 0: the simulation's peak step is the first highest.
  if (offset == nullptr) top_step_ = num_steps == 0 ? StepFacts::kNone : sim.peak_step;
  const int64_t implicit = context_.graph.training.implicit_gradient_bytes;
  const NodeId first_backward = context_.first_non_forward;
  implicit_step_ = StepFacts::kNone;
  implicit_bytes_ = 0;
  if (implicit > 0 && first_backward != kNoId && first_backward >= first && first_backward < end &&
      facts.OwnStep(first_backward) != kNone) {
    implicit_step_ = facts.OwnStep(first_backward);
    implicit_bytes_ = implicit;
  }
}

// Where the chain of `t` goes in the group of node `g`, t's first
// non-forward reader: after the chains that g's inputs listed before t
// caused (Builder::Run materializes g's inputs in order), before the others.
uint32_t DropDelta::InsertionStep(NodeId g, TensorId t) const {
  const SimResult& sim = *sim_;
  const uint32_t own = facts_->OwnStep(g), group_begin = facts_->GroupBegin(g);
  uint32_t last_before = kNone;  // start of the last chain caused by an input before t
  for (uint32_t i = context_.inputs_begin[g]; i < context_.outputs_begin[g]; ++i) {
    const TensorId x = context_.ids[i];
    if (x == t) break;
    if (!context_.Unsaved(x, *keep_)) continue;
    const NodeId p = context_.producer[x];
    if (p < first_ || p >= end_) continue;
    uint32_t q = facts_->RerunStep(p);
    if (q == kNone || q < group_begin || q >= own) continue;  // made in an earlier group
    while (q > group_begin && !sim.steps[q].starts_chain) --q;
    if (last_before == kNone || q > last_before) last_before = q;
  }
  if (last_before == kNone) return group_begin;
  for (uint32_t s = last_before + 1; s < own; ++s) {
    if (sim.steps[s].starts_chain) return s;
  }
  return own;
}

int64_t DropDelta::KeptStepsMax() {
  OldStepEvents();
  // Each run of steps that go is cut out of the maxima as one range: the
  // sweep's ranges then lie either inside a run (from a step that goes) or
  // outside every run.
  for (size_t i = 0; i < deleted_.size();) {
    size_t end = i + 1;
    while (end < deleted_.size() && deleted_[end] == deleted_[end - 1] + 1) ++end;
    events_.push_back({deleted_[i], 0});
    events_.push_back({deleted_[end - 1] + 1, 0});
    i = end;
  }
  SortEventsByStep();
  // The highest old step, where it stays, is one of the steps the maximum
  // is over: its value after the changes starts it.
  int64_t highest = TopStays() ? TopValue() : RangeMax::kEmpty;
  int64_t running = 0, from = 0;
  // No old step is above the highest of all: a run that cannot pass
  // `highest` so is not read (with the highest step's value first, every
  // run whose changes add no more than those over that step).
  if (!all_max_ready_) {
    all_max_ = StepsMax(0, static_cast<uint32_t>(sim_->steps.size()));
    all_max_ready_ = true;
  }
  auto take = [&](int64_t lo, int64_t hi) {  // old steps [lo, hi)
    if (lo >= hi || Deleted(static_cast<uint32_t>(lo))) return;
    if (highest != RangeMax::kEmpty && all_max_ + running <= highest) return;
    highest = std::max(highest, StepsMax(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)) +
                                    running);
  };
  for (const auto& [at, bytes] : events_) {
    if (at > from) take(from, at);
    from = std::max(from, at);
    running += bytes;
  }
  take(from, static_cast<int64_t>(sim_->steps.size()));
  return highest;
}

int64_t DropDelta::StepsMax(uint32_t lo, uint32_t hi) const {
  if (group_max_ == nullptr) return value_.Query(lo, hi);
  // Offsets are 0 here (Index): a step's value is its total.
  const StepFacts& facts = *facts_;
  const int64_t* const total = sim_->total.data();
  auto scan = [&](uint32_t from, uint32_t to) {  // steps [from, to)
    int64_t most = RangeMax::kEmpty;
    for (uint32_t s = from; s < to; ++s) most = std::max(most, total[s]);
    return most;
  };
  const uint32_t last = hi - 1;
  const NodeId g = facts.Group(lo), h = facts.Group(last);
  if (g == h) return scan(lo, hi);
  // Whole groups [from, to], the steps of the groups cut at either end.
  NodeId from = g, to = h;
  int64_t most = RangeMax::kEmpty;
  if (facts.GroupBegin(g) != lo) {
    most = scan(lo, facts.OwnStep(g) + 1);
    ++from;
  }
  if (facts.OwnStep(h) != last) {
    most = std::max(most, scan(facts.GroupBegin(h), hi));
    --to;
  }
  if (from <= to) most = std::max(most, group_max_->Query(from - first_, to - first_ + 1));
  return most;
}

void DropDelta::OldStepEvents() {
  events_sorted_ = false;
  events_.clear();
  for (const Change& change : changes_) {
    int64_t lo, hi;
    if (!OldSteps(change, &lo, &hi)) continue;
    events_.push_back({lo, change.bytes});
    events_.push_back({hi + 1, -change.bytes});
  }
}

void DropDelta::ChainEvents(int64_t a, int64_t m) {
  auto block_key = [&](int64_t k) { return (a << kKeyShift) | k; };
  chain_events_.assign(m + 1, 0);
  for (const Change& change : changes_) {
    const int64_t lo = std::max(change.lo, block_key(0)), hi = std::min(change.hi, block_key(m - 1));
    if (lo > hi) continue;
    chain_events_[lo - block_key(0)] += change.bytes;
    chain_events_[hi - block_key(0) + 1] -= change.bytes;
  }
}

void DropDelta::SortedOldStepEvents() {
  if (events_sorted_) return;
  OldStepEvents();
  SortEventsByStep();
}

void DropDelta::SortEventsByStep() {
  // By step alone: the sums read at a step add all of its events, in any
  // order (std::sort is deterministic, so the order is the same each run).
  std::sort(events_.begin(), events_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  events_sorted_ = true;
}

DropDelta::Result DropDelta::Score(TensorId t, const Cutoff* cutoff) {
  cutoff_ = cutoff;
  bool replay = false;
  Result result = ScoreChain(t, /*replay_whole=*/false, &replay);
  if (replay) {
    result = ScoreChain(t, /*replay_whole=*/true, &replay);
    whole_replays_ += result.known;
  }
  cutoff_ = nullptr;
  return result;
}

bool DropDelta::TopStays() const {
  return top_step_ != StepFacts::kNone && !Deleted(top_step_);
}

int64_t DropDelta::TopValue() const {
  int64_t value = sim_->total[top_step_] + OffsetAt(top_step_);
  for (const Change& change : changes_) {
    int64_t lo, hi;
    if (OldSteps(change, &lo, &hi) && lo <= top_step_ && top_step_ <= hi) value += change.bytes;
  }
  return value;
}

bool DropDelta::CutAtTop(double added_cost, int64_t* at_least) const {
  if (cutoff_ == nullptr || !TopStays()) return false;
  // An old step that stays: the highest node peak after is at least its value.
  *at_least = TopValue();
  return cutoff_->Beaten(*at_least, added_cost);
}

DropDelta::Result DropDelta::ScoreChain(TensorId t, bool replay_whole, bool* replay) {
  const Result unknown;
  const SimResult& sim = *sim_;
  scored_.tensor = kNoId;
  resaved_ = kNoId;
  events_sorted_ = false;
  lifetimes_.clear();
  const StepFacts& facts = *facts_;
  if (!context_.exact_costs || !Saved(t) || facts.FirstRead(t) == kNone) return unknown;
  const TensorId root = context_.root[t];
  const uint32_t original = facts.Original(root);
  if (facts.OddRoot(root) || original == kNone) return unknown;

  // Where the chain of t runs. When a node's own step is the first
  // non-forward read of t, the chain is a new one in that node's group; when
  // a recompute step is, t's chain runs inside that step's chain, which the
  // drop re-runs with t missing: [chain_begin, chain_end) are its old steps.
  const uint32_t first_read = facts.FirstRead(t);
  bool inside = sim.steps[first_read].recompute;
  uint32_t chain_begin = 0, chain_end = 0;
  TensorId target = t;  // what the chain materializes
  int64_t a = 0;        // first step after t's chain, in the old steps
  if (!inside) {
    a = InsertionStep(sim.steps[first_read].node, t);
  } else {
    chain_begin = first_read;
    while (chain_begin > 0 && !sim.steps[chain_begin].starts_chain) --chain_begin;
    chain_end = first_read + 1;
    while (sim.steps[chain_end].recompute && !sim.steps[chain_end].starts_chain) ++chain_end;
    // Its target: the first input of the group's node that its last step
    // makes and that needed a copy (Builder::Run goes through them in order).
    uint32_t own = chain_end;
    while (sim.steps[own].recompute) ++own;
    const NodeId h = sim.steps[own].node, last = sim.steps[chain_end - 1].node;
    target = kNoId;
    for (uint32_t i = context_.inputs_begin[h]; i < context_.outputs_begin[h]; ++i) {
      const TensorId x = context_.ids[i];
      if (x == t) break;  // the node reads t first (below)
      if (context_.producer[x] == last && context_.Unsaved(x, *keep_)) {
        target = x;
        break;
      }
    }
    if (target == kNoId) {
      // The group's node reads t before that chain's target: t's chain runs
      // as one of its own before that chain, which then finds t made.
      for (uint32_t i = context_.inputs_begin[h]; i < context_.outputs_begin[h]; ++i) {
        if (context_.ids[i] == t) target = t;
      }
      if (target == kNoId) return unknown;
      inside = false;
      chain_begin = chain_end = 0;
      a = InsertionStep(h, t);
    } else if (replay_whole) {
      // t's steps do not stay one run among that chain's (below): the
      // chain is re-run whole, depth first with t missing, as a new chain
      // at its place; each of its old steps is pulled into it.
      inside = false;
      a = chain_begin;
      chain_begin = chain_end = 0;
    }
  }

  // Positions in the step sequence after the drop, as keys that order old
  // steps and the chain's new ones: old step s is Key(s), the chain's k-th
  // step comes between old steps a - 1 and a.
  auto block_key = [&](int64_t k) { return (a << kKeyShift) | k; };

  // The chain, depth first as Builder::MaterializeForTensor runs it. A copy
  // is recorded in ref_ (while mark_ is the epoch) as the storage it uses:
  // one the chain makes or kExisting | an old one. Nodes the plan re-runs
  // later are "pulled" into the chain: their old steps go, their copies are
  // made earlier.
  if (++epoch_ == 0) {
    std::fill(mark_.begin(), mark_.end(), 0);
    std::fill(pulled_.begin(), pulled_.end(), 0);
    epoch_ = 1;
  }
  auto saved = [&](TensorId x) { return x != t && Saved(x); };
  auto made_here = [&](TensorId x) { return mark_[x] == epoch_; };
  const int64_t before_begin = inside ? chain_begin : a;
  {
    // A by-product: t's producer re-runs before t's chain would, in a chain
    // for another tensor (a node is re-run once at most), and the copy of t
    // that re-run makes serves t's reads.
    const NodeId p = context_.producer[t];
    const uint32_t made = p >= first_ && p < end_ ? facts.RerunStep(p) : kNone;
    if (made != kNone && made < before_begin) return ScoreByproduct(t, made, original);
  }
  // Copies that steps before the chain made.
  auto made_before = [&](TensorId x) {
    const NodeId p = context_.producer[x];
    if (p == kNoId || p < first_ || p >= end_) return false;
    const uint32_t step = facts.RerunStep(p);
    return step != kNone && step < before_begin;
  };
  // The storage a step of t's chain uses for `x`; false when not handled.
  auto storage_of = [&](TensorId x, uint32_t* storage) {
    *storage = kNone;
    if (context_.resident_root[x]) return true;
    if (!context_.forward_produced[x]) return false;
    if (saved(x)) {
      const uint32_t b = facts.Original(context_.root[x]);
      *storage = kExisting | b;
      return b != kNone;
    }
    if (made_here(x)) {
      *storage = ref_[x];
      return true;
    }
    if (!made_before(x)) return false;
    return ExistingCopy(x, storage);
  };
  chain_.clear();
  made_.clear();
  extended_.clear();
  deleted_.clear();
  stack_.assign(1, target);
  double cost = 0;
  uint32_t next_old = chain_begin;  // inside: the next old step expected
  bool started = false, ended = false;  // t's chain, among the old steps
  const TensorId* ids = context_.ids.data();
  while (!stack_.empty()) {
    const TensorId x = stack_.back();
    if (made_here(x)) {
      stack_.pop_back();
      continue;
    }
    const NodeId p = context_.producer[x];
    if (p == kNoId || p < first_ || p >= end_) return unknown;
    TensorId missing = kNoId;
    for (uint32_t i = context_.inputs_begin[p]; i < context_.outputs_begin[p]; ++i) {
      const TensorId in = ids[i];
      if (context_.forward_produced[in] && !context_.resident_root[in] && !saved(in) &&
          !made_here(in) && !made_before(in)) {
        missing = in;
        break;
      }
    }
    if (missing != kNoId) {
      stack_.push_back(missing);
      continue;
    }
    stack_.pop_back();
    if (inside) {
      while (next_old < chain_end && pulled_[sim.steps[next_old].node - first_] == epoch_) {
        ++next_old;
      }
    }
    if (inside && next_old < chain_end && sim.steps[next_old].node == p) {
      // An old step of the chain, as before; its copies are old ones.
      ++next_old;
      ended = started;
      for (uint32_t i = context_.outputs_begin[p]; i < context_.inputs_begin[p + 1]; ++i) {
        const TensorId out = ids[i];
        if (saved(out) || made_here(out)) continue;
        uint32_t storage;
        if (!ExistingCopy(out, &storage)) return unknown;
        mark_[out] = epoch_;
        ref_[out] = storage;
      }
      continue;
    }
    // A step of t's chain, in one run of steps: a node not re-run yet, or
    // one re-run after the place of the chain (pulled). Steps of t's chain
    // after an old step of the chain they run in: the chain is scored again
    // as re-run whole (Score).
    if (ended) {
      *replay = true;
      return unknown;
    }
    if (!started) {
      started = true;
      if (inside) a = next_old;
    }
    const uint32_t old_step = facts.RerunStep(p);
    const bool pulled = old_step != kNone;
    if (pulled) {
      if (old_step < a) return unknown;  // re-run earlier: it would run twice
      pulled_[p - first_] = epoch_;
      deleted_.push_back(old_step);
    }
    const int64_t at = block_key(static_cast<int64_t>(chain_.size()));
    if (chain_.size() + 1 >= kKeyHalf) return unknown;
    for (uint32_t i = context_.inputs_begin[p]; i < context_.outputs_begin[p]; ++i) {
      uint32_t storage;
      if (!storage_of(ids[i], &storage)) return unknown;
      if (storage == kNone) continue;
      if (storage & kExisting) {
        extended_.push_back({storage & ~kExisting, at});
      } else {
        made_[storage].last = std::max(made_[storage].last, at);
      }
    }
    for (uint32_t i = context_.outputs_begin[p]; i < context_.inputs_begin[p + 1]; ++i) {
      const TensorId out = ids[i];
      uint32_t storage = kNone;
      switch (context_.made[out]) {
        case SimContext::Made::kGradient: return unknown;
        case SimContext::Made::kNothing: break;
        case SimContext::Made::kAlias:
          if (!storage_of(context_.alias_of[out], &storage)) return unknown;
          break;
        case SimContext::Made::kActivation: {
          const NodeId last = context_.last_reader[out];
          if (!whole_ && last != kNoId && last >= end_) return unknown;  // lives to the end
          uint32_t moved = kNone;  // a pulled node's copy, made at its old step
          if (pulled) {
            moved = facts.Copy(out);
            if (moved == kNone || sim.buffers[moved].first_step != old_step) return unknown;
          }
          storage = static_cast<uint32_t>(made_.size());
          made_.push_back({context_.bytes[out], at, at, moved});
          break;
        }
      }
      if (saved(out) || made_here(out)) continue;
      if (storage == kNone) return unknown;
      mark_[out] = epoch_;
      ref_[out] = storage;
    }
    // The storages a pulled node's old step read lose that read.
    if (pulled) {
      for (uint32_t i = context_.inputs_begin[p]; i < context_.outputs_begin[p]; ++i) {
        uint32_t storage;
        if (!OldStorage(ids[i], /*forward_read=*/false, &storage)) return unknown;
        if (storage != kNone) extended_.push_back({storage & ~kExisting, kLost});
      }
    } else {
      cost += context_.node_cost[p];
    }
    chain_.push_back(p);
  }
  if (inside && (next_old != chain_end || !started)) {
    while (next_old < chain_end && pulled_[sim.steps[next_old].node - first_] == epoch_) ++next_old;
    if (next_old != chain_end || !started) return unknown;
  }
  const int64_t m = static_cast<int64_t>(chain_.size());
  std::sort(deleted_.begin(), deleted_.end());

  // The non-forward reads of t now read its copy, up to the last of them.
  {
    uint32_t storage;
    if (!storage_of(t, &storage) || storage == kNone) return unknown;
    if (facts.AliasLastRead(t) != kNone && facts.AliasFirstMade(t) < facts.FirstRead(t)) {
      return unknown;
    }
    const uint32_t last_read = facts.LastUse(t);
    if (Deleted(last_read)) return unknown;
    const int64_t last = Key(last_read);
    if (storage & kExisting) {
      extended_.push_back({storage & ~kExisting, last});
    } else {
      made_[storage].last = std::max(made_[storage].last, last);
    }
  }
  changes_.clear();
  // The chain's storages; a pulled node's copy leaves its old span and keeps
  // the reads outside the steps that go.
  for (NewBuffer& buffer : made_) {
    int64_t last = buffer.last;
    if (buffer.moved != kNone) {
      const Buffer& old = sim.buffers[buffer.moved];
      uint32_t kept;
      if (!LastKeptRead(buffer.moved, &kept)) return unknown;
      if (kept != old.first_step) last = std::max(last, Key(kept));
      changes_.push_back({Key(old.first_step), Key(old.last_step), -buffer.bytes});
    }
    changes_.push_back({buffer.first, last, buffer.bytes});
    buffer.last = last;  // for Patch
  }
  // The original of t's root: its last read that is not a non-forward read of t.
  if (!OriginalDies(t, original)) return unknown;
  // Old storages the chain reads live until it does; those only the steps
  // that go read die after their last read that stays.
  std::sort(extended_.begin(), extended_.end());
  moved_.clear();
  for (const NewBuffer& buffer : made_) {
    if (buffer.moved != kNone) moved_.push_back(buffer.moved);
  }
  std::sort(moved_.begin(), moved_.end());
  for (size_t i = 0; i < extended_.size();) {
    const uint32_t b = extended_[i].first;
    int64_t latest = kLost;
    for (; i < extended_.size() && extended_[i].first == b; ++i) {
      latest = std::max(latest, extended_[i].second);
    }
    // The original is done above; moved copies with the chain's storages.
    if (b == original || std::binary_search(moved_.begin(), moved_.end(), b)) continue;
    const Buffer& buffer = sim.buffers[b];
    if (buffer.first_step >= a) return unknown;
    uint32_t kept;
    if (!LastKeptRead(b, &kept)) return unknown;
    const int64_t last = std::max(latest, Key(kept));
    LastReadMoves(b, Key(buffer.last_step), last, context_.bytes[buffer.root]);
  }

  scored_ = {t, a, inside, chain_begin, cost};
  Result result;
  result.known = true;
  result.added_cost = cost;
  if (CutAtTop(cost, &result.region_max)) {
    result.cut = true;
    return result;
  }
  // The old steps that stay: piecewise-constant changes over range maxima.
  int64_t highest = KeptStepsMax();
  // The chain's steps: what lives across the place it goes, plus the changes.
  const int64_t across = Across(static_cast<uint32_t>(a)) + OffsetAt(a);
  ChainEvents(a, m);
  int64_t running = 0;
  for (int64_t k = 0; k < m; ++k) {
    running += chain_events_[k];
    const int64_t workspace = std::max<int64_t>(context_.node_workspace[chain_[k]], 0);
    highest = std::max(highest, across + running + workspace);
  }
  result.region_max = highest;
  return result;
}

// Dropping by-product `t`, whose producer the indexed simulation re-runs at
// old step `made` before t's first non-forward read: no step is added, the
// copy made there lives on to t's last use, and t's original dies early.
DropDelta::Result DropDelta::ScoreByproduct(TensorId t, uint32_t made, uint32_t original) {
  const Result unknown;
  const SimResult& sim = *sim_;
  const StepFacts& facts = *facts_;
  if (context_.root[t] != t || context_.made[t] != SimContext::Made::kActivation) return unknown;
  const NodeId reader = context_.last_reader[t];
  if (!whole_ && reader != kNoId && reader >= end_) return unknown;  // lives to the end
  const uint32_t copy = facts.Copy(t);
  if (copy == kNone || sim.buffers[copy].first_step != made) return unknown;
  if (facts.AliasLastRead(t) != kNone && facts.AliasFirstMade(t) < facts.FirstRead(t)) {
    return unknown;
  }
  const uint32_t last_use = facts.LastUse(t);
  if (last_use == kNone) return unknown;
  chain_.clear();
  made_.clear();
  moved_.clear();
  extended_.clear();
  deleted_.clear();
  changes_.clear();
  lifetimes_.clear();
  const Buffer& buffer = sim.buffers[copy];
  if (last_use > buffer.last_step) {
    LastReadMoves(copy, Key(buffer.last_step), Key(last_use), context_.bytes[t]);
  }
  if (!OriginalDies(t, original)) return unknown;
  scored_ = {t, static_cast<int64_t>(sim.steps.size()), false, 0, 0.0};  // no chain
  Result result;
  result.known = true;
  result.added_cost = 0;
  if (CutAtTop(0, &result.region_max)) {
    result.cut = true;
    return result;
  }
  result.region_max = KeptStepsMax();
  return result;
}

// The change dropping `t` makes to its root's original (storage `original`):
// it dies after its last read that is not a non-forward read of `t` (nor
// one of deleted_), or a read by the chain (extended_); false when not
// handled.
bool DropDelta::OriginalDies(TensorId t, uint32_t original) {
  const StepFacts& facts = *facts_;
  const TensorId root = context_.root[t];
  const Buffer& buffer = sim_->buffers[original];
  const NodeId forward = facts.LastForwardRead(root);
  if (forward < first_ || forward >= end_ || facts.OwnStep(forward) == kNone) return false;
  int64_t last_old = facts.OwnStep(forward);
  const uint32_t other = facts.OtherSavedUse(t);
  if (other != kNone) {
    if (Deleted(other)) return false;
    last_old = std::max<int64_t>(last_old, other);
  }
  last_old = std::max<int64_t>(last_old, buffer.first_step);
  const NodeId reader = context_.last_reader[root];
  if (!whole_ && reader != kNoId && reader >= end_) last_old = buffer.last_step;
  if (last_old > buffer.last_step || Deleted(buffer.last_step)) return false;
  int64_t last = Key(last_old);
  for (const auto& [b, at] : extended_) {
    if (b == original && at != kLost) last = std::max(last, at);
  }
  const int64_t before = Key(buffer.last_step);
  if (last < before) LastReadMoves(original, before, last, context_.bytes[buffer.root]);
  return true;
}

// The storage a step of the current simulation read for `x`: what Builder's
// BufferFor gave under the indexed plan; false when not handled.
bool DropDelta::OldStorage(TensorId x, bool forward_read, uint32_t* storage) const {
  *storage = kNone;
  if (context_.resident_root[x]) return true;
  if (!context_.forward_produced[x]) return false;
  if (forward_read || Saved(x)) {
    *storage = facts_->Original(context_.root[x]);
    return *storage != kNone;
  }
  return ExistingCopy(x, storage);
}

// The copy of `x` the current simulation made, as kExisting | its storage
// (kNone for none); false when not handled.
bool DropDelta::ExistingCopy(TensorId x, uint32_t* storage) const {
  *storage = kNone;
  for (int depth = 0; depth < 64; ++depth) {
    if (context_.made[x] == SimContext::Made::kActivation) {
      if (facts_->Copy(x) == kNone) return false;
      *storage = kExisting | facts_->Copy(x);
      return true;
    }
    if (context_.made[x] != SimContext::Made::kAlias) return false;
    x = context_.alias_of[x];
    if (context_.resident_root[x]) return true;
    if (!context_.forward_produced[x]) return false;
    if (Saved(x)) {
      if (facts_->Original(context_.root[x]) == kNone) return false;
      *storage = kExisting | facts_->Original(context_.root[x]);
      return true;
    }
  }
  return false;
}

// The last step reading storage `b` that is not one of deleted_ (its first
// step when none is), found by walking back from its last step; false when
// that walk gets long or meets a read it does not handle.
// Whether old step `s` reads storage `b` of root `root`: 1 yes, 0 no, -1 a
// read of the root this index does not place.
int DropDelta::StepReads(uint32_t s, uint32_t b, TensorId root) const {
  const Step& at = sim_->steps[s];
  const bool forward_read = context_.node_forward[at.node] && !at.recompute;
  bool reads = false;
  for (uint32_t i = context_.inputs_begin[at.node]; i < context_.outputs_begin[at.node]; ++i) {
    const TensorId x = context_.ids[i];
    if (context_.root[x] != root) continue;
    uint32_t storage;
    if (!context_.forward_produced[x] && !context_.resident_root[x]) return -1;
    if (!OldStorage(x, forward_read, &storage)) return -1;
    if ((storage & ~kExisting) == b && storage != kNone) reads = true;
  }
  return reads ? 1 : 0;
}

// Per storage root, the nodes reading a tensor of it, ascending, once each:
// the graph's, so built once. In a simulation a node's steps are its own and
// at most one re-run (StepFacts), which gives the steps reading a root.
void DropDelta::IndexRootReaders() {
  const size_t num_tensors = context_.graph.tensors.size();
  const size_t num_nodes = context_.graph.nodes.size();
  const TensorId* ids = context_.ids.data();
  readers_begin_.assign(num_tensors + 1, 0);
  std::vector<NodeId> last_counted(num_tensors, kNoId);
  for (NodeId n = 0; n < num_nodes; ++n) {
    for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
      const TensorId root = context_.root[ids[i]];
      if (last_counted[root] == n) continue;
      last_counted[root] = n;
      ++readers_begin_[root + 1];
    }
  }
  for (size_t t = 0; t < num_tensors; ++t) readers_begin_[t + 1] += readers_begin_[t];
  readers_.resize(readers_begin_[num_tensors]);
  std::vector<uint32_t> cursor(readers_begin_.begin(), readers_begin_.end() - 1);
  std::fill(last_counted.begin(), last_counted.end(), kNoId);
  for (NodeId n = 0; n < num_nodes; ++n) {
    for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
      const TensorId root = context_.root[ids[i]];
      if (last_counted[root] == n) continue;
      last_counted[root] = n;
      readers_[cursor[root]++] = n;
    }
  }
}

// The last old step that stays and reads storage `b` (its last step when
// that stays, its first when no read stays): the steps before its last one
// are walked back a few at a time, then through the steps of the nodes
// reading its root (IndexRootReaders), which give the same step.
bool DropDelta::LastKeptRead(uint32_t b, uint32_t* step) const {
  const SimResult& sim = *sim_;
  const Buffer& buffer = sim.buffers[b];
  const TensorId root = context_.root[buffer.root];
  uint32_t s = buffer.last_step;
  if (s <= buffer.first_step || !Deleted(s)) {
    *step = s;  // its last read stays
    return true;
  }
  for (int walked = 0; --s > buffer.first_step; ++walked) {
    if (walked == kShortWalk) break;
    if (Deleted(s)) continue;
    const int reads = StepReads(s, b, root);
    if (reads < 0) return false;
    if (reads > 0) {
      *step = s;
      return true;
    }
  }
  if (s > buffer.first_step) {
    // Steps (first_step, s] left: those of the root's readers, latest first.
    ++long_walks_;
    std::vector<uint32_t>& steps = reader_steps_;
    steps.clear();
    for (uint32_t i = readers_begin_[root]; i < readers_begin_[root + 1]; ++i) {
      const NodeId n = readers_[i];
      if (n < first_ || n >= end_) continue;
      for (const uint32_t r : {facts_->OwnStep(n), facts_->RerunStep(n)}) {
        if (r != kNone && r > buffer.first_step && r <= s) steps.push_back(r);
      }
    }
    std::sort(steps.begin(), steps.end());
    for (auto at = steps.end(); at != steps.begin();) {
      const uint32_t r = *--at;
      if (Deleted(r)) continue;
      const int reads = StepReads(r, b, root);
      if (reads < 0) return false;
      if (reads > 0) {
        *step = r;
        return true;
      }
    }
  }
  *step = buffer.first_step;
  return true;
}

}  // namespace ckptplan
