// Cleanup after a drop-only search: re-save tensors whose drop is no longer
// needed.
//
// A greedy that drops tensors one at a time can end with drops that later
// drops made unnecessary. This pass re-saves dropped candidates, the one
// whose re-save removes the most recompute cost first, as long as the
// simulated peak stays within the budget.
#ifndef CKPTPLAN_CLEANUP_H_
#define CKPTPLAN_CLEANUP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/base/range_add_max.h"
#include "ckptplan/sim/drop_delta.h"
#include "ckptplan/sim/regions.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/sim/step_facts.h"

namespace ckptplan {

struct CleanupResult {
  SaveSet keep;                             ///< the plan after re-saving
  std::vector<TensorId> resaved;            ///< candidates re-saved, in order
  int64_t peak_before = 0, peak_after = 0;  ///< bytes
  double cost_before = 0, cost_after = 0;   ///< recompute cost
  size_t scored = 0;                        ///< re-saves DropDelta answered, not simulated
  /// Re-saves applied on ceilings and left pending (ResaveBounds::Pend),
  /// then caught up with, by simulating them together or, a few at a time,
  /// one by one from DropDelta's patches (`caught_up_by_patches` of them).
  size_t pended = 0;
  size_t caught_up_by_patches = 0;
  size_t patched = 0;  ///< re-saves applied from DropDelta's patch, not simulated
  /// CleanupOptions::stop ended it: only `keep` and `resaved` hold, part way.
  bool stopped = false;
};

/// Re-saves dropped candidates of `keep`, most expensive recompute first
/// (the recompute cost a re-save removes; ties: lower id), each only when
/// the peak stays <= `budget_bytes`; repeats until no re-save applies. When
/// `keep` is already over budget, nothing is re-saved.
CleanupResult ResaveDropped(const Graph& graph, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes);
struct CleanupOptions {
  /// Floors, ceilings and DropDelta's exact scores answer re-saves without
  /// simulating them (ResaveBounds); off, every re-save is simulated. The
  /// result is the same.
  bool prune = true;
  /// Simulate every re-save answered without simulating too, and throw
  /// std::logic_error on a verdict or recompute cost the simulation does not
  /// bear out (tests).
  bool verify = false;
  /// When set, called with the plan before the first re-save and after each
  /// re-save applied (each such plan fits, and the cleanup's plan saves all
  /// it saves); true stops the cleanup there (CleanupResult::stopped).
  std::function<bool(const SaveSet& keep)> stop;
  /// The caller asked `stop` of the plan it gives, which fits, and it said
  /// no: it is not asked again before the first re-save.
  bool start_asked = false;
};

/// The same, reusing `context` (see SimContext).
CleanupResult ResaveDropped(const SimContext& context, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes, const CleanupOptions& options = {});

/// Floors and ceilings of the step's peak after re-saving one dropped
/// candidate, read off a region's current simulation, so that most re-saves
/// are answered without simulating them; where they leave it open,
/// DropDelta's exact score of the re-save (Judge).
///
/// Floor: re-saving `t` keeps its original storage (its root's, for a view)
/// until the group (a node and the recompute steps before it) where the
/// plan first made `t`'s recomputed copy, or re-ran the view's producer.
/// Every step before that group runs as before, so the
/// groups between the original's last read and that group hold the storage
/// on top of what they held. Only a storage whose last read is a recompute
/// step in or after that group can leave them earlier: the re-save may
/// remove that step.
///
/// Ceiling: when the chain that made the copy served `t` alone (the copy is
/// read by no recompute step, and nothing else the chain made is read after
/// it unless saved), the re-save removes exactly that chain and keeps the
/// original until the copy's last read. Steps from the original's last read
/// to the chain then hold at most the storage more, no other step holds
/// more, and the recompute cost falls by the chain's.
class ResaveBounds {
 public:
  explicit ResaveBounds(const SimContext& context);
  /// Whether re-saving dropped candidate `t` surely lifts the step's peak
  /// over `budget`, read off `memory`'s simulation of t's region (prepared
  /// on first use; Forget it when that region's plan changes). A region with
  /// copies is never ruled out: its trials serve the copies
  /// (RegionalMemory::Try), which costs less than a floor.
  bool Exceeds(const RegionalMemory& memory, TensorId t, int64_t budget);
  /// Whether re-saving `t` under plan `keep` surely keeps the step's peak
  /// within `budget` (then *added_cost is the recompute cost it adds,
  /// exactly as a trial would give it), surely does not, or either. Uses
  /// both floors, and needs node costs to be exact (SimContext::exact_costs)
  /// and the region to have no copies (as Exceeds).
  /// Where floors and ceilings leave it open, DropDelta's exact score of
  /// the re-save (DropDelta::ScoreResave) decides, when it handles it:
  /// exact() then says so. `keep` must outlive the verdicts until the region
  /// is prepared again (the score reads it).
  enum class Verdict { kFits, kExceeds, kUnknown };
  Verdict Judge(const RegionalMemory& memory, const SaveSet& keep, TensorId t, int64_t budget,
                double* added_cost);
  /// Whether the last verdict of Judge came from DropDelta's exact score.
  bool exact() const { return exact_; }
  /// After such a kFits for `t`: its simulation, worked out from the
  /// prepared one (DropDelta::PatchResave), into *trial as memory.Try would
  /// give it; false where not handled (then simulate).
  bool Patch(const RegionalMemory& memory, TensorId t, RegionalMemory::Trial* trial);
  /// The prepared region's simulation changed (or all regions' did). Its
  /// pending re-saves (Pend) are forgotten with it.
  void Forget(size_t r) {
    if (r == prepared_) Forget();
  }
  void Forget() {
    prepared_ = SIZE_MAX;
    pending_.clear();
    patch_applied_ = false;
  }
  /// Forget(r), where region r's simulation changed to the trial the last
  /// Patch wrote: the next Prepare reads only what the patch changed.
  void ForgetPatched(size_t r) {
    Forget(r);
    patch_applied_ = patch_region_ == r;
  }
  /// With `verify`, a Prepare after a patch also reads the simulation whole
  /// and throws std::logic_error where that reads differently.
  void set_verify(bool verify) { verify_ = verify; }

  /// Re-saves applied to the plan but not yet to the region's simulation.
  /// Where Judge's kFits came from a ceiling (or from DropDelta's score of a
  /// re-save that also has one), Pend makes that re-save pending instead of
  /// simulating it. A pending re-save removes its chain, and its storage
  /// is held over the steps its ceiling read, and no step holds more; so
  /// the ceiling of a later re-save whose chain and steps do not overlap a
  /// pending one's holds with the bytes of the pending storages held over
  /// its steps on top (JudgePending). Simulate the plan and Forget the
  /// region before any other verdict: the floors and DropDelta's scores
  /// read the simulation as it is.
  bool CanPend() const { return shape_.known; }
  void Pend();
  /// Forgets the pending re-saves but not the prepared simulation, which
  /// has not seen them: the simulation then catches up with them one at a
  /// time (PatchExact).
  void DropPending() { pending_.clear(); }
  /// Re-saving dropped candidate `t` of the prepared region, from
  /// DropDelta's exact score of it and its patch (DropDelta::PatchResave),
  /// into *trial as memory.Try would give it (apply it, then ForgetPatched);
  /// `keep` marks `t` saved and otherwise the plan the region's simulation
  /// is of. False where DropDelta does not handle it (then simulate).
  bool PatchExact(const RegionalMemory& memory, const SaveSet& keep, TensorId t,
                  RegionalMemory::Trial* trial);
  /// kFits (then *added_cost is the recompute cost it adds, as a trial
  /// would give it) or kUnknown, for re-saving `t` of the prepared region
  /// on top of the pending re-saves; `keep` holds them all.
  Verdict JudgePending(const SaveSet& keep, TensorId t, int64_t budget, double* added_cost);
  size_t pending() const { return pending_.size(); }
  /// The region prepared, whose re-saves are pending (SIZE_MAX: none).
  size_t prepared() const { return prepared_; }
  /// Over the step's peak with the pending re-saves, and the recompute cost
  /// they add, against the prepared simulation.
  int64_t pending_peak() const { return pending_peak_; }
  double pending_cost() const { return pending_cost_; }

  /// Reads region `r`'s current simulation; call again when it changes.
  void Prepare(const RegionalMemory& memory, size_t r);
  /// A floor under the step's peak with dropped candidate `t` of the
  /// prepared region saved, or the lowest int64_t when there is none.
  int64_t Floor(TensorId t) const;
  /// A ceiling over the step's peak, `step_peak` now under plan `keep`,
  /// with dropped candidate `t` of the prepared region saved, and in
  /// *added_cost the recompute cost that adds; the highest int64_t when there
  /// is none. Then also, in *chain_floor (when not null), a floor under that
  /// peak that only the chain's own inputs lower: the storages whose last
  /// read the chain is (the lowest int64_t when some input is a view). The
  /// prepared simulation must be the region's own (no copy's).
  int64_t Ceiling(const SaveSet& keep, TensorId t, int64_t step_peak, double* added_cost,
                  int64_t* chain_floor = nullptr);
  /// A ceiling for a by-product: `t`'s copy was made by re-running its
  /// producer in a chain for another tensor, and no step of that group
  /// reads it. Saved, `t` keeps its original until the copy's last read
  /// instead; the chain runs the same (the re-run is needed for the other
  /// tensor, and no step of the chain reads `t`), so *added_cost is 0. The
  /// steps after the original's last read, through the copy's making, hold
  /// the storage on top; after that the original stands for the copy. The
  /// highest int64_t when `t` is no such by-product.
  int64_t ByproductCeiling(TensorId t, int64_t step_peak, double* added_cost);

 private:
  const SimContext& context_;
  size_t prepared_ = SIZE_MAX;  // region Prepare read last, unless forgotten
  // The simulation read may be a copy's (RegionSim::figures): its node ids
  // start at first_, and its tensor ids are the region's less tensor_shift_.
  NodeId first_ = 0;
  int64_t tensor_shift_ = 0;
  // Over nodes of the region, the step's bytes: with zero offsets moved by
  // an applied patch's GroupChanges (patch_moved_) where Prepare read the
  // region patched last (peaks_region_), else built anew.
  RangeAddMax node_peak_;
  size_t peaks_region_ = SIZE_MAX;
  size_t num_nodes_ = 0;                  // in the region
  // The prepared simulation's groups and storages, and for ceilings its
  // non-forward reads (read on first use).
  StepFacts facts_;
  // The last Patch's region, the fill of facts_ it read and the part of its
  // trial as in that fill's simulation; whether that trial was applied
  // since (ForgetPatched).
  size_t patch_region_ = SIZE_MAX;
  uint64_t patch_fills_ = 0;
  SimPrefix patch_same_;
  DropDelta::GroupChanges patch_moved_;
  bool patch_applied_ = false, verify_ = false;
  // Per step s: bytes of the storages made before s whose last read, at or
  // after s, is a recompute step; read on first use after a Prepare (a
  // Prepare for PatchExact alone needs none).
  const std::vector<int64_t>& Leaving() const;
  mutable std::vector<int64_t> leaving_;
  mutable bool leaving_ready_ = false;
  // Reads what only ceilings need from the prepared simulation.
  void PrepareCeilings();
  // DropDelta's exact scores of re-saves, over the prepared simulation
  // (its own facts_), indexed on first use.
  std::unique_ptr<DropDelta> delta_;
  bool delta_ready_ = false, exact_ = false;
  void IndexDelta(const SaveSet& keep);
  const RegionalMemory::Part* part_ = nullptr;  // the prepared region
  // The step re-running `node`, kNoStep when none does (or it is outside).
  uint32_t Rerun(NodeId node) const;
  // The steps making and last reading the recomputed copy of `t`, and the
  // last reading the original of `root`; kNoStep when there is none.
  uint32_t CopyStep(TensorId t) const;
  uint32_t CopyLast(TensorId t) const;
  uint32_t OriginalLast(TensorId root) const;
  // The most bytes at a step after step `after` and before step `before`
  // (needs PrepareCeilings), and in *gap the highest node of the whole
  // groups between theirs, when there are any; the lowest int64_t when no
  // step is between.
  int64_t HighestBetween(uint32_t after, uint32_t before, int64_t* gap) const;

  // For ceilings: the simulation read and its region's offsets (valid until
  // Forget or the next Prepare), and, once read, per step the step's bytes.
  const SimResult* sim_ = nullptr;
  const std::vector<int64_t>* offset_ = nullptr;
  bool ceilings_ready_ = false;
  std::vector<int64_t> step_total_;  // with offsets, when the region has them
  const int64_t* step_bytes_ = nullptr;  // the step's bytes per step: those or sim_->total
  std::vector<TensorId> roots_;           // of Ceiling: storages counted once

  // What the last ceiling (Ceiling or ByproductCeiling, when it gave one)
  // read: the steps first..last the re-save removes (`removes`), or for a
  // by-product the step that makes its copy, which stays; the steps after
  // held_after and before held_to, which hold the storage on top, and the
  // most bytes at one of them (`between`, the lowest int64_t when there is
  // none).
  struct Shape {
    bool known = false, removes = false;
    uint32_t first = 0, last = 0, held_after = 0, held_to = 0;
    int64_t between = 0, bytes = 0;
    TensorId root = 0;
    int64_t peak = 0;          // over the step's peak with the re-save
    double added_cost = 0;
  };
  Shape shape_;
  std::vector<Shape> pending_;
  int64_t pending_peak_ = 0;
  double pending_cost_ = 0;
  void RecordShape(uint32_t first, uint32_t last, bool removes, uint32_t held_after,
                   uint32_t held_to, int64_t between, TensorId root);
};

}  // namespace ckptplan

#endif  // CKPTPLAN_CLEANUP_H_
