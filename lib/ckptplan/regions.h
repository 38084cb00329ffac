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
#include <vector>

#include "ckptplan/graph.h"
#include "ckptplan/simulator.h"

namespace ckptplan {

class RegionalMemory {
 public:
  /// One region's current plan.
  struct Part {
    Region range;
    std::vector<TensorId> candidates;  ///< made in the region, by id
    /// Per node of the region: the step's node peak minus the region's,
    /// which no plan changes.
    std::vector<int64_t> offset;
    SimResult sim;        ///< region simulation of the current plan
    int64_t max = 0;      ///< highest node peak, in the step's bytes
  };

  /// Simulates `keep` region by region. Splits only when every node cost is
  /// an integer and all of them sum below 2^53: region costs then add up to
  /// the step's exactly, whatever the order.
  RegionalMemory(const SimContext& context, const SaveSet& keep, const SimOptions& options);

  /// The step's peak and recompute cost for the current plan.
  int64_t peak() const { return peak_; }
  double cost() const { return cost_; }
  /// The starting plan's peak and recompute cost, from a whole-step simulation.
  int64_t start_peak() const { return start_peak_; }
  double start_cost() const { return start_cost_; }
  size_t size() const { return parts_.size(); }
  const Part& part(size_t r) const { return parts_[r]; }
  /// Region that makes candidate `t`.
  size_t RegionOf(TensorId t) const { return region_of_node_[context_.graph.tensors[t].producer]; }
  /// Highest node peak outside region `r`, in the step's bytes.
  int64_t Outside(size_t r) const;
  SimOptions OptionsFor(size_t r) const;

  /// A changed plan of one region, simulated.
  struct Trial {
    size_t region = 0;
    int64_t peak = 0;        ///< the step's peak
    int64_t region_max = 0;  ///< the region's highest node peak, step's bytes
    double added_cost = 0;   ///< recompute cost after minus before
    double cost = 0;         ///< the step's recompute cost after
    SimResult sim;
  };
  /// Simulates region `r` under `keep` (the current plan but for candidates
  /// of region `r`).
  void Try(size_t r, const SaveSet& keep, Trial* trial) const;
  /// Makes `trial` the current plan of its region.
  void Apply(Trial* trial);

 private:
  void UpdateTop();

  const SimContext& context_;
  SimOptions options_;
  std::vector<Part> parts_;
  std::vector<uint32_t> region_of_node_;
  int64_t peak_ = 0, start_peak_ = 0;
  double start_cost_ = 0, cost_ = 0;
  // The two highest region maxima and how many regions reach the first.
  int64_t top_ = 0, second_ = 0;
  size_t at_top_ = 0;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_REGIONS_H_
