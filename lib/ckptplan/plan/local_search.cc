#include "ckptplan/plan/local_search.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

#include "ckptplan/plan/cleanup.h"
#include "ckptplan/sim/drop_delta.h"
#include "ckptplan/sim/regions.h"

namespace ckptplan {
namespace {

struct Key {
  int64_t over = 0;  // bytes over budget
  double cost = 0;
  int64_t peak = 0;

  bool operator<(const Key& other) const {
    return std::tie(over, cost, peak) < std::tie(other.over, other.cost, other.peak);
  }
};

class Search {
 public:
  Search(const SimContext& context, const LocalSearchOptions& options, SaveSet keep)
      : context_(context),
        options_(options),
        keep_(std::move(keep)),
        candidates_(context_.droppable),
        floor_(context) {
    sim_options_.reserve_bytes = options.reserve_bytes;
    Reset();
  }

  // One round; false when no move improves or the simulation budget is spent.
  bool Step() {
    Key best = current_;
    std::vector<TensorId> best_move;
    // Single flips change one region: simulate that region only. While the
    // plan fits, a re-save that cannot fit cannot improve it either.
    const bool fits = current_.over == 0;
    floor_.Forget();  // the last round's move changed the plan
    indexed_ = kNoRegion;
    bool best_fast = false;  // scored by DropDelta: best_trial_ not filled
    for (TensorId t : candidates_) {
      if (Exhausted()) return false;
      ++considered_;
      // A move over the budget cannot improve a fitting plan's key.
      if (options_.prune && fits && !keep_[t] &&
          floor_.Exceeds(*memory_, t, options_.budget_bytes)) {
        ++floored_;
        if (options_.verify) VerifyFloor(t);
        continue;
      }
      Key key;
      const bool fast = keep_[t] && ScoreDropFast(t, &key);
      if (!fast) {
        keep_[t] ^= 1;
        memory_->Try(memory_->RegionOf(t), keep_, &trial_);
        keep_[t] ^= 1;
        ++simulations_;
        key = KeyOf(trial_.peak, trial_.cost);
      }
      if (key < best) {
        best = key;
        best_move = {t};
        best_fast = fast;
        if (!fast) std::swap(best_trial_, trial_);
      }
    }
    if (best_move.size() == 1 && best_fast) SimulateChosen(best_move[0], best);
    if (best_move.empty() && candidates_.size() <= options_.pair_limit) {
      for (size_t i = 0; i < candidates_.size(); ++i) {
        for (size_t j = i + 1; j < candidates_.size(); ++j) {
          if (Exhausted()) return false;
          Try({candidates_[i], candidates_[j]}, &best, &best_move);
        }
      }
    }
    const size_t k = candidates_.size();
    if (best_move.empty() && k <= options_.triple_limit) {
      for (size_t i = 0; i < k; ++i) {
        for (size_t j = i + 1; j < k; ++j) {
          for (size_t l = j + 1; l < k; ++l) {
            if (Exhausted()) return false;
            Try({candidates_[i], candidates_[j], candidates_[l]}, &best, &best_move);
          }
        }
      }
    }
    if (best_move.empty()) return false;
    for (TensorId t : best_move) keep_[t] ^= 1;
    if (best_move.size() == 1) {
      memory_->Apply(&best_trial_);
      current_ = KeyOf(memory_->peak(), memory_->cost());
    } else {
      Reset();
    }
    ++moves_;
    return true;
  }

  LocalSearchResult Result() {
    LocalSearchResult result;
    result.keep = keep_;
    result.peak = current_.peak;
    result.recompute_cost = current_.cost;
    result.fits = current_.over == 0;
    result.moves = moves_;
    result.considered = considered_;
    result.simulations = simulations_;
    result.floored = floored_;
    result.fast_scores = fast_scores_;
    return result;
  }

 private:
  bool Exhausted() const { return considered_ >= options_.max_considered; }

  static constexpr size_t kNoRegion = SIZE_MAX;

  // The key after dropping saved candidate `t`, from its region's current
  // simulation (DropDelta) without simulating; false when pruning is off,
  // the region's trials are shared with copies (RegionalMemory::Try), or
  // DropDelta does not handle the drop. In verify mode the drop is also
  // simulated and must give the same peak and cost.
  bool ScoreDropFast(TensorId t, Key* key) {
    if (!options_.prune || !context_.exact_costs) return false;
    const size_t r = memory_->RegionOf(t);
    const RegionalMemory::Part& part = memory_->part(r);
    if (part.shape.copies > 1) return false;
    if (!delta_) delta_ = std::make_unique<DropDelta>(context_);
    if (indexed_ != r) {
      delta_->Index(part.sim.full(), keep_, part.range.first, part.range.end,
                    part.zero_offset ? nullptr : &part.offset);
      indexed_ = r;
    }
    const DropDelta::Result scored = delta_->Score(t);
    if (!scored.known) return false;
    ++fast_scores_;
    // Exact integer costs (DropDelta answers no others): the sum is the
    // trial's cost exactly.
    *key = KeyOf(std::max(memory_->Outside(r), scored.region_max),
                 memory_->cost() + scored.added_cost);
    if (options_.verify) {
      keep_[t] = 0;
      memory_->Try(r, keep_, &trial_);
      keep_[t] = 1;
      ++simulations_;
      if (trial_.peak != key->peak || trial_.cost != key->cost) FastScoreMismatch(t, *key);
    }
    return true;
  }

  // The single flip chosen was scored without simulating: simulate it, once,
  // into best_trial_ to apply it; its figures must be the ones scored.
  void SimulateChosen(TensorId t, const Key& scored) {
    keep_[t] ^= 1;
    memory_->Try(memory_->RegionOf(t), keep_, &best_trial_);
    keep_[t] ^= 1;
    ++simulations_;
    if (best_trial_.peak != scored.peak || best_trial_.cost != scored.cost) {
      FastScoreMismatch(t, scored);
    }
  }

  [[noreturn]] void FastScoreMismatch(TensorId t, const Key& scored) const {
    throw std::logic_error("local search: DropDelta scored dropping '" +
                           context_.graph.tensors[t].name + "' at peak " +
                           std::to_string(scored.peak) + ", cost " + std::to_string(scored.cost) +
                           " but it simulates to another");
  }

  // Verify mode: the re-save of `t` a floor ruled out, simulated.
  void VerifyFloor(TensorId t) {
    keep_[t] ^= 1;
    memory_->Try(memory_->RegionOf(t), keep_, &trial_);
    keep_[t] ^= 1;
    ++simulations_;
    if (trial_.peak <= options_.budget_bytes) {
      throw std::logic_error("local search: the floor ruled out re-saving '" +
                             context_.graph.tensors[t].name + "' but its peak " +
                             std::to_string(trial_.peak) + " fits the budget " +
                             std::to_string(options_.budget_bytes));
    }
  }

  Key KeyOf(int64_t peak, double cost) const {
    return {std::max<int64_t>(0, peak - options_.budget_bytes), cost, peak};
  }

  // Simulates the current plan from scratch, region by region.
  void Reset() {
    memory_ = std::make_unique<RegionalMemory>(context_, keep_, sim_options_);
    ++simulations_;
    current_ = KeyOf(memory_->peak(), memory_->cost());
  }

  // Moves of several flips (small graphs only): simulated whole.
  void Try(const std::vector<TensorId>& flips, Key* best, std::vector<TensorId>* best_move) {
    for (TensorId t : flips) keep_[t] ^= 1;
    ++considered_;
    ++simulations_;
    Simulate(context_, keep_, sim_options_, &whole_);
    for (TensorId t : flips) keep_[t] ^= 1;
    Key key = KeyOf(whole_.peak_bytes, whole_.recompute_cost);
    if (key < *best) {
      *best = key;
      *best_move = flips;
    }
  }

  const SimContext& context_;
  const LocalSearchOptions& options_;
  SaveSet keep_;
  const std::vector<TensorId>& candidates_;
  SimOptions sim_options_;
  std::unique_ptr<RegionalMemory> memory_;
  RegionalMemory::Trial trial_, best_trial_;
  ResaveBounds floor_;
  std::unique_ptr<DropDelta> delta_;  // made on first use
  size_t indexed_ = kNoRegion;        // region delta_ indexes this round
  SimResult whole_;
  Key current_;
  size_t moves_ = 0;
  size_t considered_ = 0;
  size_t simulations_ = 0;
  size_t floored_ = 0;  // re-saves ruled out by a floor, not simulated
  size_t fast_scores_ = 0;  // drops scored by DropDelta, not simulated
};

}  // namespace

LocalSearchResult ImprovePlan(const Graph& graph, const SaveSet& keep,
                              const LocalSearchOptions& options) {
  return ImprovePlan(SimContext(graph), keep, options);
}

LocalSearchResult ImprovePlan(const SimContext& context, const SaveSet& keep,
                              const LocalSearchOptions& options) {
  Search search(context, options, keep);
  while (search.Step()) {
  }
  LocalSearchResult result = search.Result();
  spdlog::info("local search: {} moves, {} considered, {} simulations ({} re-saves ruled out "
               "by a floor, {} drops scored by DropDelta), peak {} bytes, cost {}, {}",
               result.moves, result.considered, result.simulations, result.floored,
               result.fast_scores, result.peak,
               result.recompute_cost, result.fits ? "fits" : "does not fit");
  return result;
}

}  // namespace ckptplan
