// The step's memory kept region by region (FindRegions in simulator.h).
//
// A plan's choices in one region change the node peaks of that region only,
// and by the same amount they change its region simulation. Searches that
// try one change at a time (the greedy, cleanup) keep one simulation per
// region and re-simulate only the region a change touches, so that a try
// costs the region's size instead of the step's.
#ifndef CKPTPLAN_REGIONS_H_
#define CKPTPLAN_REGIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// A region's simulation, its own or one of a copy of the region (ShapeRegions)
/// shared with it. Peaks, totals and costs are the same in copies; steps,
/// buffers and recomputes name ids, which full() shifts, once, on first use.
class RegionSim {
 public:
  /// The simulation with this region's ids.
  const SimResult& full() const;
  /// The same but for ids (those of the copy it is shared with): enough for
  /// node_peak, total, peak_bytes and recompute_cost.
  const SimResult& figures() const { return shared_ ? *shared_ : own_; }
  /// What to add to the node and tensor ids of figures() to get this
  /// region's: nonzero only while the simulation is shared.
  int64_t node_shift() const { return shared_ ? node_shift_ : 0; }
  int64_t tensor_shift() const { return shared_ ? tensor_shift_ : 0; }
  /// Storage for a simulation of this region's own.
  SimResult* own() {
    shared_.reset();
    return &own_;
  }
  /// Takes `sim`, a copy's simulation whose ids are lower by the shifts.
  void Share(std::shared_ptr<const SimResult> sim, int64_t node_shift, int64_t tensor_shift);
  void swap(RegionSim& other);

 private:
  mutable SimResult own_;
  mutable std::shared_ptr<const SimResult> shared_;
  int64_t node_shift_ = 0, tensor_shift_ = 0;
};

/// A hash of a region's plan, `plan` the keep bits (0 or 1) of the
/// candidates it makes in id order (the order copies' candidates correspond
/// in), equal for copies (ShapeRegions) with equal plans.
uint64_t RegionPlanKey(const RegionShape& shape, const std::vector<uint8_t>& plan);

class RegionalMemory {
 public:
  /// One region's current plan.
  struct Part {
    Region range;
    std::vector<TensorId> candidates;  ///< made in the region, by id
    /// Per node of the region: the step's node peak minus the region's,
    /// which no plan changes.
    std::vector<int64_t> offset;
    bool zero_offset = false;  ///< every offset is 0 (e.g. the region is the step)
    RegionSim sim;        ///< region simulation of the current plan
    int64_t max = 0;      ///< highest node peak, in the step's bytes
    RegionShape shape;    ///< see ShapeRegions
    /// Whether `offset` is the shape's first region's plus a constant,
    /// `offset_shift`: then equal plans give node peaks that differ by it.
    bool offsets_match = false;
    int64_t offset_shift = 0;
  };

  /// Simulates `keep` region by region (copies with the same plan once).
  /// Splits only when every node cost is
  /// an integer and all of them sum below 2^53: region costs then add up to
  /// the step's exactly, whatever the order.
  RegionalMemory(const SimContext& context, const SaveSet& keep, const SimOptions& options);

  /// The step's peak and recompute cost for the current plan.
  int64_t peak() const { return peak_; }
  double cost() const { return cost_; }
  /// The starting plan's peak and recompute cost, from a whole-step simulation.
  int64_t start_peak() const { return start_peak_; }
  double start_cost() const { return start_cost_; }
  /// Simulations the constructor ran: the whole step's, and each region's
  /// unless the step is one region, but once for copies of a region (same
  /// shape) with the same plan, which share it.
  size_t start_simulations() const { return start_simulations_; }
  size_t size() const { return parts_.size(); }
  const SimContext& context() const { return context_; }
  const Part& part(size_t r) const { return parts_[r]; }
  /// Region that makes candidate `t`.
  size_t RegionOf(TensorId t) const { return split_ ? context_.RegionOf(t) : 0; }
  /// Each region's highest node peak (Part::max), side by side.
  const std::vector<int64_t>& maxes() const { return maxes_; }
  /// Highest node peak outside region `r`, in the step's bytes.
  int64_t Outside(size_t r) const;
  /// Regions whose highest node peak is the step's peak.
  size_t at_top() const { return at_top_; }
  SimOptions OptionsFor(size_t r) const;

  /// A changed plan of one region, simulated.
  struct Trial {
    size_t region = 0;
    int64_t peak = 0;        ///< the step's peak
    int64_t region_max = 0;  ///< the region's highest node peak, step's bytes
    double added_cost = 0;   ///< recompute cost after minus before
    double cost = 0;         ///< the step's recompute cost after
    RegionSim sim;           ///< unless Try was asked for the figures only
    bool has_sim = false;
  };
  /// Simulates region `r` under `keep` (the current plan but for candidates
  /// of region `r`). A plan that a copy of the region (same shape) was tried
  /// with is not simulated again: its simulation is shared, or with
  /// `need_sim` false, only the figures are filled in.
  void Try(size_t r, const SaveSet& keep, Trial* trial, bool need_sim = true) const;
  /// Fills in `trial` as Try(r, ...) would, but from the simulation the
  /// caller put in trial->sim.own() (worked out without simulating, e.g.
  /// DropDelta::Patch; with OptionsFor(r)). Only for a region without copies
  /// (shape.copies == 1): copies' trials are kept for one another.
  void Take(size_t r, Trial* trial) const;
  /// Makes `trial` (tried with `need_sim`) the current plan of its region.
  void Apply(Trial* trial);
  /// Changes region `r`'s plan by patching its simulation in place:
  /// `patch(SimResult*)` (e.g. DropDelta::PatchInPlace with OptionsFor(r))
  /// returns false, the simulation as it was, where it cannot. Only for a
  /// region without copies. On true, *figures holds what Try would have
  /// given for the plan patched (no simulation) and it is the current plan.
  template <typename Patch>
  bool PatchInPlace(size_t r, Patch&& patch, Trial* figures) {
    Part& part = parts_[r];
    if (part.shape.copies != 1) return false;
    const double before = part.sim.full().recompute_cost;  // made its own, if shared
    if (!patch(part.sim.own())) return false;
    figures->region = r;
    figures->has_sim = false;
    TakePatched(r, before, figures);
    return true;
  }

  /// Trials answered from a copy of their region (see Try).
  size_t shared_trials() const { return shared_trials_; }
  /// RegionPlanKey of region `r`'s plan under `keep`, and in `plan` the keep
  /// bits of its candidates, in order.
  uint64_t PlanKey(size_t r, const SaveSet& keep, std::vector<uint8_t>* plan) const;

 private:
  void UpdateTop();
  // PatchInPlace's figures, and the region's; `before`, its cost before.
  void TakePatched(size_t r, double before, Trial* figures);
  // The trial's step peak and costs, from its region max and the region's
  // recompute cost after and before.
  void FinishTrial(size_t r, double region_cost, double region_cost_before, Trial* trial) const;
  // A trial of region `source` with `plan` (the keep bits of its candidates,
  // in order), kept for its copies: the figures, and the simulation when a
  // caller needed it.
  struct Memo {
    size_t source = 0;
    std::vector<uint8_t> plan;
    double recompute_cost = 0;
    int64_t region_max = 0;             // with the source's offsets
    std::vector<int64_t> node_peak;     // when `sim` is not kept
    std::shared_ptr<const SimResult> sim;  // when a caller needed it
    size_t bytes = 0;
  };
  const SimContext& context_;
  SimOptions options_;
  std::vector<Part> parts_;
  std::vector<int64_t> maxes_;  // parts_[r].max
  bool split_ = false;  // the regions are the context's (else one, the step)
  int64_t peak_ = 0, start_peak_ = 0;
  size_t start_simulations_ = 1;
  double start_cost_ = 0, cost_ = 0;
  // The two highest region maxima and how many regions reach the first.
  int64_t top_ = 0, second_ = 0;
  size_t at_top_ = 0;
  // Simulations kept for the region's copies, by PlanKey; dropped all at
  // once past a size.
  mutable std::unordered_map<uint64_t, Memo> memo_;
  mutable size_t memo_bytes_ = 0;
  mutable size_t shared_trials_ = 0;
  mutable std::vector<uint8_t> plan_;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_REGIONS_H_
