// A floor under the peak of any plan, read off the save-all simulation.
//
// Every plan's simulation runs each node's own step, so its peak is at least
// its total at the own step of node n, the node of the save-all simulation's
// peak step. The memory rule (simulator.h) keeps there, whatever the plan,
// what save-all keeps there but for forward storages: the storages
// non-forward nodes made (no recompute step reads or makes them, and
// non-forward nodes run as in save-all), the resident state, n's workspace
// and the implicit gradients. A forward root's original stays there when a
// forward node at or after n reads the root or makes a tensor of it (the
// forward runs alike under every plan; LastForwardReads), or when a
// non-forward node at or after n reads a saved candidate of the root
// (saved: its non-forward reads read the original). The bytes of every
// other forward root live there in save-all are taken off. A dropped
// candidate that is a storage's root and that non-forward nodes read both
// at or before n and at or after it has its copy live there (made before
// its first non-forward reader, freed after its last): its bytes are added.
// So is the copy of a forward storage's root that is not saved, whose
// producer a chain re-runs at or before n, and that non-forward nodes read
// after n through it (the root itself or a view of it, dropped) unless the
// root is a candidate counted above: the chains of the dropped candidates
// non-forward nodes read at or before n re-run their producers and,
// through inputs neither saved nor resident, theirs, each node once in a
// simulation, and a copy lives from its re-run to its last read (a dropped
// view's reads go to its root's copy). What else a plan adds there (other
// recomputed copies, reads that extend a storage) is not counted. So
// Of(keep) is at most the peak Simulate gives for `keep`, not a peak itself.
// tests/sim/peak_floor_test.cc works floors out by hand and checks them
// against simulations of random plans.
#ifndef CKPTPLAN_PEAK_FLOOR_H_
#define CKPTPLAN_PEAK_FLOOR_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// At most the recompute cost Simulate gives for `keep` (any options): each
/// dropped candidate's chain re-runs its producer and, through inputs no
/// plan saves (forward-made, not resident, not candidates), their
/// producers; this sums those nodes' costs, once each. On graphs whose
/// chains stop at candidates (views and their roots both saved) it is the
/// cost itself. A pass over the dropped candidates and the nodes reached.
double RecomputeCostFloor(const SimContext& context, const SaveSet& keep);
/// Per node, 1 where those chains reach it: every node Simulate re-runs for
/// `keep` is marked (a chain re-runs only producers it reaches through
/// tensors neither saved nor resident), so a node marked 0 is not re-run.
std::vector<uint8_t> ReachedByChains(const SimContext& context, const SaveSet& keep);

class PeakFloor {
 public:
  /// From `save_all`, the whole-step simulation of `context`'s graph under
  /// SaveAll with the options the plans floored are simulated with.
  /// `context` must outlive the floor.
  PeakFloor(const SimContext& context, const SimResult& save_all);
  /// At most the peak of the whole-step simulation of `keep` (the same
  /// options as save-all's).
  /// `copies`, unless null: the bytes of the copies counted in it.
  int64_t Of(const SaveSet& keep, int64_t* copies = nullptr) const;
  /// At most the recompute cost of any plan that saves every candidate
  /// `keep` saves and whose peak is at most `budget` (the same options);
  /// +infinity when no such plan exists. Each dropped candidate re-runs its
  /// producer at least once (the simulator's chains), so such a plan costs
  /// at least its dropped candidates' producers, once each. A producer the
  /// plan no longer re-runs has had every dropped candidate of it saved;
  /// the floor rises by the bytes of each root so kept at the peak step,
  /// which is shared among the producers of its candidates read there, and
  /// falls by at most the copies saved. What the producers left re-run can
  /// cost least is then a fractional knapsack: their costs, those bytes as
  /// weights, and budget - Of(keep) + the dropped copies' bytes as capacity.
  double CostOfFitting(const SaveSet& keep, int64_t budget) const;

 private:
  int64_t total_ = 0;  // save-all's total at its peak step
  // Forward roots live at that step in save-all that a plan may free there:
  // their bytes, and the candidates of the root a non-forward node at or
  // after the step's node reads (readers_[first, end)): one of them saved
  // keeps the root live.
  struct Root {
    int64_t bytes;
    uint32_t first, end;
  };
  std::vector<Root> roots_;
  std::vector<TensorId> readers_;
  // Candidates whose copy is live there when dropped, and its bytes.
  std::vector<std::pair<TensorId, int64_t>> copies_;
  const SimContext& context_;  // the graph's, which must outlive the floor
  // For the copies chains make early: the candidates non-forward nodes read
  // at or before the peak step's node, per tensor whether it is a forward
  // storage's root that may hold such a copy (not a candidate counted in
  // copies_), and the candidates read after the node by root (sorted).
  std::vector<TensorId> read_early_;
  std::vector<uint8_t> late_root_;
  std::vector<std::pair<TensorId, TensorId>> read_after_;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_PEAK_FLOOR_H_
