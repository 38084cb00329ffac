#include "ckptplan/plan/fast_score.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ckptplan {

FastDropScorer::FastDropScorer(const SimContext& context, std::string caller,
                               const StepFacts* facts)
    : context_(context), caller_(std::move(caller)), facts_(facts) {}

bool FastDropScorer::Score(const RegionalMemory& memory, size_t r, const SaveSet& keep,
                           TensorId t, FastScore* score, const DropDelta::Cutoff* cutoff) {
  return Flip(memory, r, keep, t, /*resave=*/false, score, cutoff);
}

bool FastDropScorer::ScoreResave(const RegionalMemory& memory, size_t r, const SaveSet& keep,
                                 TensorId t, FastScore* score) {
  return Flip(memory, r, keep, t, /*resave=*/true, score, nullptr);
}

bool FastDropScorer::Flip(const RegionalMemory& memory, size_t r, const SaveSet& keep,
                          TensorId t, bool resave, FastScore* score,
                          const DropDelta::Cutoff* cutoff) {
  // DropDelta answers exact integer costs only: no index is worth building.
  if (!context_.exact_costs) return false;
  if (!delta_) delta_ = std::make_unique<DropDelta>(context_, facts_);
  if (indexed_ != r) {
    const RegionalMemory::Part& part = memory.part(r);
    delta_->Index(part.sim.full(), keep, part.range.first, part.range.end,
                  part.zero_offset ? nullptr : &part.offset,
                  part.zero_offset && r == group_max_region_ ? group_max_ : nullptr);
    indexed_ = r;
  }
  const DropDelta::Result scored = resave ? delta_->ScoreResave(t) : delta_->Score(t, cutoff);
  if (!scored.known) return false;
  score->region_max = scored.region_max;
  score->peak = std::max(memory.Outside(r), scored.region_max);
  score->added_cost = scored.added_cost;
  // Exact integer costs: the sum is the trial's cost exactly.
  score->cost = memory.cost() + scored.added_cost;
  score->cut = scored.cut;
  return true;
}

void FastDropScorer::Confirm(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                             const FastScore& score, RegionalMemory::Trial* trial) const {
  keep[t] ^= 1;
  memory.Try(r, keep, trial);
  keep[t] ^= 1;
  if (trial->region_max == score.region_max && trial->peak == score.peak &&
      trial->added_cost == score.added_cost && trial->cost == score.cost) {
    return;
  }
  throw std::logic_error(caller_ + ": DropDelta scored " + (keep[t] ? "dropping" : "re-saving") +
                         " '" + context_.graph.tensors[t].name + "' at region max " +
                         std::to_string(score.region_max) + ", added cost " +
                         std::to_string(score.added_cost) + " (peak " +
                         std::to_string(score.peak) + ", cost " + std::to_string(score.cost) +
                         ") but it simulates to " + std::to_string(trial->region_max) + ", " +
                         std::to_string(trial->added_cost) + " (" + std::to_string(trial->peak) +
                         ", " + std::to_string(trial->cost) + ")");
}

bool FastDropScorer::Apply(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                           const FastScore& score, bool verify, RegionalMemory::Trial* trial,
                           RegionalMemory::Trial* verify_trial) {
  if (!delta_ || indexed_ != r || memory.part(r).shape.copies != 1 ||
      !delta_->Patch(t, memory.OptionsFor(r), trial->sim.own())) {
    return false;
  }
  memory.Take(r, trial);
  keep[t] = 0;
  CheckPatch(memory, r, keep, t, score, verify, *trial, trial->sim.full(), verify_trial, "patch");
  keep[t] = 1;
  return true;
}

void FastDropScorer::CheckPatch(const RegionalMemory& memory, size_t r, const SaveSet& keep,
                                TensorId t, const FastScore& score, bool verify,
                                const RegionalMemory::Trial& figures, const SimResult& patched,
                                RegionalMemory::Trial* verify_trial, const char* what) const {
  std::string difference;
  if (figures.region_max != score.region_max || figures.peak != score.peak ||
      figures.added_cost != score.added_cost || figures.cost != score.cost) {
    difference = "its figures";
  } else if (verify) {
    memory.Try(r, keep, verify_trial);
    difference = SimResultDifference(verify_trial->sim.full(), patched);
  }
  if (!difference.empty()) {
    throw std::logic_error(caller_ + ": DropDelta's " + what + " of dropping '" +
                           context_.graph.tensors[t].name + "' differs from its simulation in " +
                           difference);
  }
}

bool FastDropScorer::ApplyInPlace(RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                                  const FastScore& score, bool verify,
                                  RegionalMemory::Trial* figures,
                                  RegionalMemory::Trial* verify_trial) {
  if (!delta_ || indexed_ != r || !keep[t]) return false;
  const SimOptions options = memory.OptionsFor(r);
  if (!memory.PatchInPlace(
          r, [&](SimResult* sim) { return delta_->PatchInPlace(t, options, sim); }, figures)) {
    return false;
  }
  indexed_ = kNone;  // the index read the simulation as it was
  keep[t] = 0;
  CheckPatch(memory, r, keep, t, score, verify, *figures, memory.part(r).sim.full(),
             verify_trial, "patch in place");
  return true;
}

}  // namespace ckptplan
