// Scoring a drop from its region's current simulation, without simulating.
//
// Local search and the incremental greedy both try dropping saved candidates
// of one region against the same current plan. FastDropScorer indexes the
// region's current simulation with DropDelta (sim/drop_delta.h) at the first
// drop it scores there, answers each drop DropDelta handles from that index,
// and confirms a score against the drop's simulation: in verify mode for
// every score, always for the drop a search chooses (its trial, to apply it,
// is DropDelta's patch of the region's simulation where Apply can make one,
// simulated once otherwise). A difference means DropDelta and the simulator
// disagree about the memory rule, and throws. Which drops a search scores this way, and what
// it makes of the figures, stays the search's.
#ifndef CKPTPLAN_FAST_SCORE_H_
#define CKPTPLAN_FAST_SCORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/drop_delta.h"
#include "ckptplan/sim/regions.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// The figures of a drop (or re-save), as RegionalMemory::Try would give them.
struct FastScore {
  int64_t region_max = 0;  ///< the region's highest node peak after, step's bytes
  int64_t peak = 0;        ///< the step's peak after
  double added_cost = 0;   ///< recompute cost after minus before (exact)
  double cost = 0;         ///< the step's recompute cost after
  /// Cut short by the cutoff given to Score (DropDelta::Result::cut):
  /// region_max and peak are only values they reach at least.
  bool cut = false;
};

class FastDropScorer {
 public:
  /// `caller` names the search in error messages. With `facts`, DropDelta
  /// reads the region's step facts from them (the caller fills them from the
  /// region's current simulation before each Score after Forget; see
  /// DropDelta's constructor); without, it fills its own.
  FastDropScorer(const SimContext& context, std::string caller,
                 const StepFacts* facts = nullptr);

  /// The current plan changed: the next Score indexes again. `group_max`,
  /// when given: the node peaks of region `region`'s current simulation,
  /// for DropDelta::Index when that region's offsets are 0 (not read
  /// otherwise); it must not change until the next Forget.
  void Forget(const RangeAddMax* group_max = nullptr, size_t region = kNone) {
    indexed_ = kNone;
    group_max_ = group_max;
    group_max_region_ = region;
  }

  /// Dropping saved candidate `t` of region `r` from the region's current
  /// simulation in `memory`, whose plan is `keep`; false when DropDelta does
  /// not handle the drop (nor any of a graph whose costs are not exact). The
  /// region is indexed at its first score since Forget or another region's.
  /// With `cutoff`, the score may be cut short (DropDelta::Score).
  bool Score(const RegionalMemory& memory, size_t r, const SaveSet& keep, TensorId t,
             FastScore* score, const DropDelta::Cutoff* cutoff = nullptr);

  /// The same for re-saving dropped candidate `t` (DropDelta::ScoreResave).
  bool ScoreResave(const RegionalMemory& memory, size_t r, const SaveSet& keep, TensorId t,
                   FastScore* score);

  /// Simulates dropping `t` (re-saving it, when dropped in `keep`) from
  /// region `r` into *trial and throws std::logic_error unless it gives
  /// `score`'s figures. `keep` is restored.
  void Confirm(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
               const FastScore& score, RegionalMemory::Trial* trial) const;

  /// Instead of Confirm, for the drop a search chooses: *trial from
  /// DropDelta's patch of region `r`'s simulation (DropDelta::Patch), no
  /// simulation, where the region is the one last scored, has no copies
  /// (their trials are kept for one another) and Patch handles the drop;
  /// false otherwise (then Confirm). Throws std::logic_error unless the
  /// patch gives `score`'s figures and, with `verify`, unless a simulation
  /// of the drop (into *verify_trial) equals it field by field.
  bool Apply(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
             const FastScore& score, bool verify, RegionalMemory::Trial* trial,
             RegionalMemory::Trial* verify_trial);
  /// Apply, but patching region `r`'s simulation in place
  /// (DropDelta::PatchInPlace through RegionalMemory::PatchInPlace) and
  /// making the drop its plan; `keep` is then updated. *figures gets the
  /// trial's figures. False, nothing changed, where it cannot (then Try and
  /// Apply); with `verify`, a simulation of the drop (into *verify_trial)
  /// must equal the patch field by field. The region is indexed anew at its
  /// next score.
  bool ApplyInPlace(RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                    const FastScore& score, bool verify, RegionalMemory::Trial* figures,
                    RegionalMemory::Trial* verify_trial);
  /// After an Apply that returned true: what its trial's simulation keeps of
  /// the region's (DropDelta::patched_prefix), and how its node peaks moved
  /// (DropDelta::group_changes).
  SimPrefix patched_prefix() const { return delta_ ? delta_->patched_prefix() : SimPrefix{}; }
  const DropDelta::GroupChanges& group_changes() const { return delta_->group_changes(); }

 private:
  static constexpr size_t kNone = SIZE_MAX;

  bool Flip(const RegionalMemory& memory, size_t r, const SaveSet& keep, TensorId t, bool resave,
            FastScore* score, const DropDelta::Cutoff* cutoff);
  // Throws std::logic_error unless the figures of region `r` with `t`
  // dropped (in `keep`), worked out by DropDelta's `what` into `patched`,
  // are `score`'s and, with `verify`, `patched` equals a simulation (into
  // *verify_trial) field by field.
  void CheckPatch(const RegionalMemory& memory, size_t r, const SaveSet& keep, TensorId t,
                  const FastScore& score, bool verify, const RegionalMemory::Trial& figures,
                  const SimResult& patched, RegionalMemory::Trial* verify_trial,
                  const char* what) const;
  const RangeAddMax* group_max_ = nullptr;  // Forget's
  size_t group_max_region_ = kNone;

  const SimContext& context_;
  std::string caller_;
  const StepFacts* facts_;            // shared with the caller; null: DropDelta's own
  std::unique_ptr<DropDelta> delta_;  // made on first use
  size_t indexed_ = kNone;            // region delta_ indexes
};

}  // namespace ckptplan

#endif  // CKPTPLAN_FAST_SCORE_H_
