#include "ckptplan/plan/local_search.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

#include "ckptplan/plan/cleanup.h"
#include "ckptplan/plan/fast_score.h"
#include "ckptplan/sim/peak_floor.h"
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
        floor_(context),
        scorer_(context, "local search"),
        walked_(context.graph.nodes.size(), 0) {
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
    scorer_.Forget();
    bool best_fast = false;  // scored by DropDelta: best_trial_ not filled
    FastScore score, best_score;
    // While the plan fits, a drop that adds cost cannot improve its key
    // (nor the best's, which fits and costs no more). A drop's chain
    // re-runs its producer and the producers it reaches through inputs
    // neither saved nor resident: one of them that no chain re-runs now and
    // that costs something adds its cost (each node re-runs once; a drop
    // only adds demands). Exact costs: the sums then rise.
    const bool cost_rules = options_.prune && fits && context_.exact_costs;
    if (cost_rules) rerun_ = ReachedByChains(context_, keep_);
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
      if (cost_rules && keep_[t] && AddsCost(t)) {
        ++costed_;
        if (options_.verify) VerifyCosted(t, best);
        continue;
      }
      Key key;
      const bool fast = ScoreFlipFast(t, best, &score);
      if (fast) {
        key = KeyOf(score.peak, score.cost);
      } else {
        TryFlip(t, &trial_);
        key = KeyOf(trial_.peak, trial_.cost);
      }
      if (key < best) {
        best = key;
        best_move = {t};
        best_fast = fast;
        if (fast) {
          best_score = score;
        } else {
          std::swap(best_trial_, trial_);
        }
      }
    }
    if (best_move.size() == 1 && best_fast) {
      // Scored without simulating: into best_trial_ to apply it, from
      // DropDelta's patch or simulated, once.
      const TensorId t = best_move[0];
      const size_t r = memory_->RegionOf(t);
      if (scorer_.Apply(*memory_, r, keep_, t, best_score, options_.verify, &best_trial_,
                        &trial_)) {
        simulations_ += options_.verify;
      } else {
        scorer_.Confirm(*memory_, r, keep_, t, best_score, &best_trial_);
        ++simulations_;
      }
    }
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
    result.cut_scores = cut_scores_;
    result.costed = costed_;
    return result;
  }

 private:
  bool Exhausted() const { return considered_ >= options_.max_considered; }

  // Flipping candidate `t`, simulated in its region into *trial.
  void TryFlip(TensorId t, RegionalMemory::Trial* trial) {
    keep_[t] ^= 1;
    memory_->Try(memory_->RegionOf(t), keep_, trial);
    keep_[t] ^= 1;
    ++simulations_;
  }

  // A drop whose key (KeyOf) cannot be below `best` from a peak it reaches
  // at least, its own and the other regions' (`outside`), and its exact
  // cost after (the current `cost` plus the added cost): every part of the
  // key only rises with the peak.
  class KeyBeaten final : public DropDelta::Cutoff {
   public:
    KeyBeaten(const Search& search, const Key& best, int64_t outside, double cost)
        : search_(search), best_(best), outside_(outside), cost_(cost) {}
    bool Beaten(int64_t region_max_at_least, double added_cost) const override {
      return !(search_.KeyOf(std::max(outside_, region_max_at_least), cost_ + added_cost) <
               best_);
    }

   private:
    const Search& search_;
    Key best_;
    int64_t outside_;
    double cost_;
  };

  // Flipping candidate `t` (dropping it when saved, re-saving it when
  // dropped), from its region's current simulation without simulating
  // (FastDropScorer); false when pruning is off, the region's trials are
  // shared with copies (RegionalMemory::Try), or DropDelta does not handle
  // the flip. A drop's score may be cut short once its key is seen not to
  // beat `best` (its figures then give a key no lower than its own). In
  // verify mode the flip is also simulated and must give the same figures
  // (a cut score: a key no lower than the figures', and not below `best`).
  bool ScoreFlipFast(TensorId t, const Key& best, FastScore* score) {
    if (!options_.prune) return false;
    const size_t r = memory_->RegionOf(t);
    if (memory_->part(r).shape.copies > 1) return false;
    const KeyBeaten beaten(*this, best, memory_->Outside(r), memory_->cost());
    const bool scored = keep_[t] ? scorer_.Score(*memory_, r, keep_, t, score, &beaten)
                                 : scorer_.ScoreResave(*memory_, r, keep_, t, score);
    if (!scored) return false;
    ++fast_scores_;
    cut_scores_ += score->cut;
    if (options_.verify && score->cut) {
      TryFlip(t, &trial_);
      const Key key = KeyOf(trial_.peak, trial_.cost);
      if (trial_.region_max < score->region_max || trial_.cost != score->cost || key < best) {
        throw std::logic_error("local search: the score of dropping '" +
                               context_.graph.tensors[t].name +
                               "' was cut short, but its simulation reaches region max " +
                               std::to_string(trial_.region_max) + " (cut at " +
                               std::to_string(score->region_max) + "), cost " +
                               std::to_string(trial_.cost) + (key < best ? ", a better key" : ""));
      }
    } else if (options_.verify) {
      scorer_.Confirm(*memory_, r, keep_, t, *score, &trial_);
      ++simulations_;
    }
    return true;
  }

  // Whether dropping saved candidate `t` re-runs a node of some cost that
  // no chain re-runs now (rerun_): a walk from its producer through inputs
  // neither saved nor resident, stopping at nodes re-run already.
  bool AddsCost(TensorId t) {
    ++walk_;
    stack_.assign(1, context_.producer[t]);
    walked_[context_.producer[t]] = walk_;
    while (!stack_.empty()) {
      const NodeId n = stack_.back();
      stack_.pop_back();
      if (rerun_[n]) continue;  // re-run now: its inputs' chains too
      if (context_.node_cost[n] > 0) return true;
      for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
        const TensorId in = context_.ids[i];
        if (!context_.Unsaved(in, keep_)) continue;
        const NodeId p = context_.producer[in];
        if (walked_[p] == walk_) continue;
        walked_[p] = walk_;
        stack_.push_back(p);
      }
    }
    return false;
  }

  // Verify mode: the drop of `t` ruled out by the cost it adds, simulated:
  // it must add cost and not beat `best`.
  void VerifyCosted(TensorId t, const Key& best) {
    TryFlip(t, &trial_);
    if (!(trial_.cost > current_.cost) || KeyOf(trial_.peak, trial_.cost) < best) {
      throw std::logic_error("local search: dropping '" + context_.graph.tensors[t].name +
                             "' was ruled out as adding cost, but it simulates "
                             "to cost " + std::to_string(trial_.cost) + " from " +
                             std::to_string(current_.cost));
    }
  }

  // Verify mode: the re-save of `t` a floor ruled out, simulated.
  void VerifyFloor(TensorId t) {
    TryFlip(t, &trial_);
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
  FastDropScorer scorer_;
  SimResult whole_;
  Key current_;
  size_t moves_ = 0;
  size_t considered_ = 0;
  size_t simulations_ = 0;
  size_t floored_ = 0;  // re-saves ruled out by a floor, not simulated
  size_t fast_scores_ = 0;  // drops and re-saves scored by DropDelta, not simulated
  size_t cut_scores_ = 0;   // of those, drops cut short
  size_t costed_ = 0;       // drops ruled out by the cost they add
  // AddsCost: the nodes chains re-run now (per round), and its walk.
  std::vector<uint8_t> rerun_;
  std::vector<uint32_t> walked_;
  std::vector<NodeId> stack_;
  uint32_t walk_ = 0;
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
               "by a floor, {} drops by the cost they add, {} drops and re-saves scored "
               "by DropDelta, {} of them cut short), peak {} bytes, cost {}, {}",
               result.moves, result.considered, result.simulations, result.floored,
               result.costed, result.fast_scores, result.cut_scores, result.peak,
               result.recompute_cost, result.fits ? "fits" : "does not fit");
  return result;
}

}  // namespace ckptplan
