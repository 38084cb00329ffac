#include "ckptplan/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "ckptplan/plan/cleanup.h"
#include "ckptplan/base/console.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/plan/incremental.h"
#include "ckptplan/plan/local_search.h"
#include "ckptplan/plan/mincut.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/sim/peak_floor.h"
#include "ckptplan/sim/regions.h"

namespace ckptplan {
namespace {

// Most segment counts the every-k-th search tries.
constexpr int kMaxSegments = 64;
// Local search runs from this many of the best plans when the graph has at
// most kManyStartsLimit candidates, from the best one otherwise.
constexpr size_t kLocalSearchStarts = 4;
constexpr size_t kManyStartsLimit = 64;
// Local search is capped at this many node-steps per search (e.g. 20000
// moves considered in a 200-node region), so that it stays a small part of
// the planning time on large graphs. Its single flips simulate one region
// (FindRegions) each. The cap counts moves considered, simulated or ruled out
// by a floor, so that pruning does not change where the search stops.
constexpr size_t kLocalSearchNodeSteps = 4'000'000;
// The every-k-th search simulates the whole step once per k: it tries at most
// this many node-steps' worth of k (and at least kMinSegments).
constexpr size_t kSegmentNodeSteps = 1'000'000;
constexpr int kMinSegments = 2;
// Above this many candidates the greedy runs from the --start set only: on
// such graphs (e.g. many microbatches) both starts end at the same plans
// while each greedy takes seconds.
constexpr size_t kSecondStartLimit = 10'000;
// A baseline plan (segments, scope checkpointing, knapsack) that fits is
// cleaned up when that costs at most this many node-steps of trials, or this
// many per node of the graph (about as many whole-step simulations), or when
// no plan found before it fits. Cleanup tries each dropped candidate's
// re-save with a region simulation, so on one deep region it costs about
// candidates x nodes; there the greedy's plan is cleaned up, and a baseline
// only where nothing else fits.
constexpr size_t kCleanupNodeSteps = 1'000'000;
constexpr size_t kCleanupNodeStepsPerNode = 16;
// The extra greedy runs (from the second start, and from the best segment
// plan when none fits) run where the graph has at most kSecondStartLimit
// candidates and candidates x the largest region's nodes (about what the
// greedy costs: a drop scored or simulated per candidate, in its region) is at
// most this. On one deep region of 10^4 nodes or more they cost up to several
// times the first start's greedy and did not give the plan chosen wherever we
// looked:
// - the second start ended at the first's plan (transformers of 69 and 208
//   layers, a stack of 1,000 blocks, random layered DAGs of 9,508 and 28,535
//   nodes; 50% and 80% of save-all);
// - the greedy from segments ended above the min-cut start's greedy or the
//   segment plan itself (transformers of 7 and 69 layers, the stack, random
//   DAGs of 1,031, 9,508 and 28,535 nodes; 25% to 60% of save-all). On the
//   28,535-node DAG at 50% it took 29 s of the default search's 38 s.
constexpr size_t kSecondStartNodeSteps = 10'000'000;

class Candidates {
 public:
  Candidates(const SimContext& context, const PlannerOptions& options, bool cleanup = true)
      : context_(context), options_(options), cleanup_(cleanup) {
    sim_options_.reserve_bytes = options.reserve_bytes;
    sim_options_.record_details = false;  // only the peak and the cost are read
  }

  PlannerResult Measure(SaveSet keep, std::string method) const {
    // A plan added before has its figures (the step's, exactly) with it:
    // baselines often repeat one (scope-checkpoint saves all on graphs
    // without scopes).
    const PlannerResult* same = nullptr;  // the first such plan, added or deferred
    for (const PlannerResult& earlier : all_) {
      if (same == nullptr && earlier.keep == keep) same = &earlier;
    }
    for (const Pending& earlier : pending_) {
      if (same == nullptr && earlier.result.keep == keep) same = &earlier.result;
    }
    if (same != nullptr) {
      return Result(std::move(keep), same->peak, same->recompute_cost, std::move(method));
    }
    SimResult sim = Simulate(context_, keep, sim_options_);
    return Measured(std::move(keep), sim, std::move(method));
  }
  // Measure's result from `sim`, the simulation of `keep` under sim_options().
  PlannerResult Measured(SaveSet keep, const SimResult& sim, std::string method) const {
    return Result(std::move(keep), sim.peak_bytes, sim.recompute_cost, std::move(method));
  }
  const SimOptions& sim_options() const { return sim_options_; }
  // A plan with its peak and recompute cost (the step's, under
  // sim_options()), judged against the budget.
  PlannerResult Result(SaveSet keep, int64_t peak, double cost, std::string method) const {
    PlannerResult result;
    result.keep = std::move(keep);
    result.peak = peak;
    result.recompute_cost = cost;
    result.fits = peak <= options_.budget_bytes;
    result.method = std::move(method);
    return result;
  }

  // Adds a plan found since `since` (for the log's timings); a fitting plan
  // is cleaned up first.
  void Add(SaveSet keep, std::string method,
           std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now()) {
    AddPlan(std::move(keep), std::move(method), since, Clean::kAlways);
  }

  // Adds a baseline's plan: as Add, but a fitting one is cleaned up unless
  // that is dear (CleanupWork over CleanupBudget) and a plan added with Add
  // (a greedy's) fits. Where no greedy fits, the baselines' cleanups compete
  // for the plan, and all run.
  void AddBaseline(SaveSet keep, std::string method,
                   std::chrono::steady_clock::time_point since =
                       std::chrono::steady_clock::now()) {
    if (CannotWin(keep)) {
      LeftOut(keep, method);
      // Verify mode adds it as without the shortcut: the plan must not change.
      if (!options_.verify) return;
    }
    AddPlan(std::move(keep), std::move(method), since, Clean::kWhereCheap);
  }
  // Adds a baseline's plan measured before (Measure, under sim_options()),
  // as AddBaseline would.
  void AddBaselineMeasured(PlannerResult measured, std::chrono::steady_clock::time_point since) {
    AddResult(std::move(measured), since, Clean::kWhereCheap);
  }

  // Whether the baseline `keep` cannot become the plan, found without
  // simulating it: where only the best plan is read afterwards (with a
  // floor: local search from one start), a plan added with Add fits (so the
  // baseline would not be cleaned up, its cleanup too dear: TooDear) and
  // the baseline costs more than the best fitting plan, it loses to that
  // plan whether it fits or not (Better), and so to the best at the end.
  // The cost is read as the segment plans' is: its floor first
  // (RecomputeCostFloor), then the cost itself (RecomputeCost, a fraction
  // of a simulation).
  bool CannotWin(const SaveSet& keep) const {
    if (floor_ == nullptr || !options_.prune || !cleanup_ || !always_fits_ || !has_best_ ||
        !best_.fits || !TooDear(CleanupWork(keep), always_fits_)) {
      return false;
    }
    const double to_beat = best_.recompute_cost;
    return RecomputeCostFloor(context_, keep) > to_beat + CostMargin(best_) ||
           RecomputeCost(context_, keep, sim_options_) > to_beat;
  }
  // The baseline `keep`, named `method`, left out as CannotWin says: logged,
  // and in verify mode simulated and checked to lose to the best plan (the
  // caller then adds it all the same).
  void LeftOut(const SaveSet& keep, const std::string& method) const {
    spdlog::debug("planner: {}: costs more than {} ({}), which fits, and is not cleaned up: "
                  "not simulated", method, best_.method, best_.recompute_cost);
    if (!options_.verify) return;
    const PlannerResult measured = Measured(keep, Simulate(context_, keep, sim_options_), method);
    if (!Better(best_, measured)) {
      throw std::logic_error("planner: " + method + " was left out as costing more than " +
                             best_.method + ", but (peak " + std::to_string(measured.peak) +
                             ", cost " + std::to_string(measured.recompute_cost) +
                             ") does not lose to it");
    }
  }

  // Adds a plan measured before (Measure), as Add would.
  void AddMeasured(PlannerResult measured, std::chrono::steady_clock::time_point since) {
    AddResult(std::move(measured), since, Clean::kAlways);
  }

  const PlannerResult& best() const {
    if (deferring_) throw std::logic_error("planner: the best plan read while plans are deferred");
    return best_;
  }

  // Plans added from Defer() to Flush() join in the order added, with the
  // figures and the best plan they would have had added one by one. Flush
  // runs the cleanups a floor cannot stop first, then the others from the
  // lowest floor up (PeakFloor::CostOfFitting), each stopped against the
  // best fitting plan by then: a baseline's cleanup that cannot beat one
  // added after it is then stopped too (added one by one, the first
  // baseline's ran whole wherever no plan before it fit). A stopped plan
  // loses outright to a plan that joins, so the best is the same.
  void Defer() { deferring_ = true; }
  void Flush() {
    deferring_ = false;
    std::vector<Pending> pending = std::move(pending_);
    pending_.clear();
    const size_t n = pending.size();
    // What always_fits_ is when each joins (a cleaned-up plan fits as its
    // start did).
    std::vector<uint8_t> always_fits(n);
    bool fits = always_fits_;
    for (size_t i = 0; i < n; ++i) {
      always_fits[i] = fits;
      if (pending[i].clean == Clean::kAlways) fits = fits || pending[i].result.fits;
    }
    const PlannerResult* to_beat = has_best_ && best_.fits ? &best_ : nullptr;
    auto consider = [&](const PlannerResult& result) {
      if (result.fits && (to_beat == nullptr || Better(result, *to_beat))) to_beat = &result;
    };
    std::vector<std::pair<double, size_t>> stoppable;  // (cost floor, index)
    std::vector<size_t> work(n);
    for (size_t i = 0; i < n; ++i) {
      Pending& plan = pending[i];
      work[i] = Work(plan.result, plan.clean);
      // (A plan left uncleaned, as dear where a greedy's plan fits, needs no floor.)
      if (Stoppable(plan.result, plan.clean) && !TooDear(work[i], always_fits[i])) {
        stoppable.emplace_back(floor_->CostOfFitting(plan.result.keep, options_.budget_bytes), i);
        continue;
      }
      plan.result =
          CleanedUp(std::move(plan.result), plan.clean, work[i], always_fits[i], nullptr);
      consider(plan.result);
    }
    std::sort(stoppable.begin(), stoppable.end());
    for (const auto& [at_least, i] : stoppable) {
      Pending& plan = pending[i];
      plan.result = CleanedUp(std::move(plan.result), plan.clean, work[i], always_fits[i],
                              to_beat, at_least);
      consider(plan.result);
    }
    for (Pending& plan : pending) Join(std::move(plan.result), plan.since, plan.clean);
  }
  // With a floor, a baseline's cleanup is stopped where its plan, cleaned
  // up, cannot beat a fitting plan of the candidates (PeakFloor::
  // CostOfFitting; the best so far, or in Flush the best by then), and
  // the baseline is added as it was: only where the best plan alone is read
  // afterwards (local search from one start), so that the plan chosen is
  // the same.
  void set_floor(const PeakFloor* floor) { floor_ = floor; }

  // Fitting beats not fitting; then lower cost (fitting) or lower peak.
  // Ties keep the earlier plan.
  static bool Better(const PlannerResult& a, const PlannerResult& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits)
      return a.recompute_cost < b.recompute_cost ||
             (a.recompute_cost == b.recompute_cost && a.peak < b.peak);
    return a.peak < b.peak || (a.peak == b.peak && a.recompute_cost < b.recompute_cost);
  }

  // The `count` best plans with distinct save sets, best first.
  std::vector<PlannerResult> Top(size_t count) const {
    if (deferring_) throw std::logic_error("planner: the best plans read while plans are deferred");
    std::vector<PlannerResult> sorted = all_;
    std::stable_sort(sorted.begin(), sorted.end(), Better);
    std::vector<PlannerResult> top;
    for (PlannerResult& plan : sorted) {
      if (top.size() == count) break;
      bool seen = false;
      for (const PlannerResult& other : top) seen = seen || other.keep == plan.keep;
      if (!seen) top.push_back(std::move(plan));
    }
    return top;
  }

 private:
  // How a fitting plan added is cleaned up: always (Add), or where cheap
  // (AddBaseline).
  enum class Clean { kAlways, kWhereCheap };

  // A plan added while deferring, measured, and how it is to be cleaned up.
  struct Pending {
    PlannerResult result;
    std::chrono::steady_clock::time_point since;
    Clean clean;
  };

  void AddPlan(SaveSet keep, std::string method, std::chrono::steady_clock::time_point since,
               Clean clean) {
    AddResult(Measure(std::move(keep), std::move(method)), since, clean);
  }

  void AddResult(PlannerResult result, std::chrono::steady_clock::time_point since, Clean clean) {
    if (deferring_) {
      pending_.push_back({std::move(result), since, clean});
      return;
    }
    const size_t work = Work(result, clean);
    result =
        CleanedUp(std::move(result), clean, work, always_fits_, has_best_ ? &best_ : nullptr);
    Join(std::move(result), since, clean);
  }

  // Whether CleanedUp may stop the cleanup of `result` (added with `clean`)
  // by its cost floor, given a fitting plan to beat.
  bool Stoppable(const PlannerResult& result, Clean clean) const {
    return result.fits && cleanup_ && clean == Clean::kWhereCheap && floor_ != nullptr &&
           options_.prune;
  }

  // What cleaning `result` up would cost (CleanupWork) where that decides
  // whether it is cleaned up: a fitting plan added with AddBaseline; else 0.
  size_t Work(const PlannerResult& result, Clean clean) const {
    return result.fits && clean == Clean::kWhereCheap ? CleanupWork(result.keep) : 0;
  }

  // Whether a fitting baseline is left uncleaned: its cleanup's `work` is
  // over the budget and a plan added with Add fits (`always_fits`).
  bool TooDear(size_t work, bool always_fits) const {
    return always_fits && work > CleanupBudget();
  }

  // `result`, cleaned up where it fits and is to be: the cleanup's plan, or
  // `result` where there is none or the cleanup was stopped. `work`: its
  // Work; `always_fits`: whether a plan added before it with Add fits;
  // `to_beat`: a plan of the candidates a stoppable cleanup is stopped
  // against (null: none), with `start_floor`, where given, the plan's own
  // CostOfFitting.
  PlannerResult CleanedUp(PlannerResult result, Clean clean, size_t work, bool always_fits,
                          const PlannerResult* to_beat,
                          std::optional<double> start_floor = std::nullopt) {
    const std::string method = result.method;
    if (work > 0) {
      spdlog::debug("planner: {}: cleanup estimated at {} node-steps (budget {}{})", method, work,
                    CleanupBudget(), always_fits ? "" : ", no greedy's plan fits");
    }
    if (!result.fits || !cleanup_) return result;
    if (TooDear(work, always_fits)) {
      spdlog::debug("planner: {}: not cleaned up", method);
      return result;
    }
    // The same plan cleans up the same: a start often ends where another did.
    const Cleaned* cleaned = nullptr;
    for (const Cleaned& earlier : cleaned_) {
      if (earlier.from == result.keep) cleaned = &earlier;
    }
    // A floor under the cost of the plan cleaned up, over the cost of the
    // plan to beat: it loses (only baselines' cleanups are stopped so; see set_floor).
    std::optional<double> hopeless;
    size_t calls = 0, hopeless_after = 0;  // calls of cleanup_options.stop; re-saves by then
    // When the floor is read next, and its last reading (re-saves, floor).
    size_t next_reading = 0;
    std::optional<std::pair<size_t, double>> last_reading;
    if (cleaned == nullptr) {
      CleanupOptions cleanup_options;
      cleanup_options.prune = options_.prune;
      cleanup_options.verify = options_.verify;
      if (Stoppable(result, clean) && to_beat != nullptr && to_beat->fits) {
        // Any fitting plan that saves what the cleanup's plan saves so far
        // costs at least its CostOfFitting, and the cleanup only saves
        // more: once that is over the cost of the plan to beat, the cleanup
        // is stopped. Read before the first re-save and then after at most
        // twice as many (a pass over the dropped candidates each, about as
        // dear as two or three re-saves on a deep region): sooner where the
        // floor's rise since the last reading says it reaches the cost to
        // beat sooner, but at least 1/16 of the re-saves later (where the
        // rise slows, the readings do not crowd). Stopped sooner or later,
        // the plan loses outright, so when it is read changes no plan.
        cleanup_options.stop = [&](const SaveSet& keep) {
          const size_t resaved = calls++;
          if (hopeless || resaved != next_reading) return false;
          const double at_least = resaved == 0 && start_floor
                                      ? *start_floor
                                      : floor_->CostOfFitting(keep, options_.budget_bytes);
          const double to_reach = to_beat->recompute_cost + CostMargin(*to_beat);
          if (!(at_least > to_reach)) {
            next_reading = NextFloorReading(resaved, at_least, last_reading, to_reach);
            last_reading = {resaved, at_least};
            return false;
          }
          hopeless = at_least;
          hopeless_after = resaved;
          return !options_.verify;  // verify mode cleans up whole, and checks below
        };
      }
      // Asked before the cleanup simulates its start (the cleanup then
      // does not ask again): a cleanup stopped there is not run at all.
      bool stopped_at_start = false;
      if (cleanup_options.stop) {
        stopped_at_start = cleanup_options.stop(result.keep);
        cleanup_options.start_asked = true;
      }
      if (!stopped_at_start) {
        CleanupResult cleanup = ResaveDropped(context_, result.keep, options_.budget_bytes,
                                              options_.reserve_bytes, cleanup_options);
        if (hopeless && options_.verify) {
          const PlannerResult whole =
              Result(cleanup.keep, cleanup.peak_after, cleanup.cost_after, method + " + cleanup");
          if (whole.recompute_cost < *hopeless - CostMargin(*to_beat) ||
              !Better(*to_beat, whole)) {
            throw std::logic_error(
                "planner: the cleanup of " + method + " was stopped, as a fitting plan that "
                "saves what it saved by then costs at least " + std::to_string(*hopeless) +
                ", but cleaned up whole it costs " + std::to_string(whole.recompute_cost) +
                " (to beat: " + to_beat->method + ", " +
                std::to_string(to_beat->recompute_cost) + ")");
          }
        }
        if (!hopeless) {
          cleaned_.push_back({result.keep, std::move(cleanup)});
          cleaned = &cleaned_.back();
        }
      }
    }
    if (hopeless) {
      spdlog::debug("planner: {}: cleanup stopped after {} re-saves: it cannot beat {}", method,
                    hopeless_after, to_beat->method);
    } else if (!cleaned->result.resaved.empty()) {
      // The cleanup's figures are the step's, exactly (RegionalMemory).
      const CleanupResult& cleanup = cleaned->result;
      result = Result(cleanup.keep, cleanup.peak_after, cleanup.cost_after, method + " + cleanup");
    }
    return result;
  }

  // `result` (cleaned up) joins the candidates.
  void Join(PlannerResult result, std::chrono::steady_clock::time_point since, Clean clean) {
    spdlog::debug("planner: {}: peak {} bytes, cost {}, {} ({:.3f} s)", result.method, result.peak,
                  result.recompute_cost, result.fits ? "fits" : "does not fit",
                  SecondsSince(since));
    if (clean == Clean::kAlways) always_fits_ = always_fits_ || result.fits;
    if (!has_best_ || Better(result, best_)) {
      best_ = result;
      has_best_ = true;
    }
    all_.push_back(std::move(result));
  }

  // The margin a cost floor must clear over a cost (the floor's shares are
  // divisions): relative to the plan to beat's and the step's costs.
  double CostMargin(const PlannerResult& to_beat) const {
    return 1e-9 * (to_beat.recompute_cost + context_.step_cost);
  }

  // What cleaning `keep` up costs, about, in node-steps: a trial (a region
  // simulation) per dropped candidate, the first round counted. Copies of a
  // region (same shape) with the same plan share their trials
  // (RegionalMemory::Try), so each distinct plan of a shape counts once.
  size_t CleanupWork(const SaveSet& keep) const {
    const std::vector<Region>& regions = context_.regions();
    if (!context_.exact_costs || regions.size() <= 1) {
      // One region: each trial simulates the step.
      size_t dropped = 0;
      for (TensorId t : context_.candidates) dropped += !keep[t];
      return dropped * context_.graph.nodes.size();
    }
    // Per region: dropped candidates, and the keep bits of its candidates in
    // id order (as RegionalMemory::PlanKey reads them).
    std::vector<size_t> dropped(regions.size(), 0);
    std::vector<std::vector<uint8_t>> plans(regions.size());
    for (TensorId t : context_.candidates) {
      const size_t r = context_.RegionOf(t);
      dropped[r] += !keep[t];
      plans[r].push_back(keep[t] != 0);
    }
    const std::vector<RegionShape>& shapes = context_.shapes();
    // Regions counted, by their plan's key.
    std::unordered_map<uint64_t, std::vector<size_t>> counted;
    size_t work = 0;
    for (size_t r = 0; r < regions.size(); ++r) {
      if (dropped[r] == 0) continue;
      std::vector<size_t>& same_key = counted[RegionPlanKey(shapes[r], plans[r])];
      const bool seen = std::any_of(same_key.begin(), same_key.end(), [&](size_t q) {
        return shapes[q].first_of_shape == shapes[r].first_of_shape && plans[q] == plans[r];
      });
      if (seen) {
        // A shared trial still reads the region's plan (its key, then the
        // memo's plan compared): about a node-step per candidate of it.
        work += dropped[r] * plans[r].size();
        continue;
      }
      same_key.push_back(r);
      work += dropped[r] * (regions[r].end - regions[r].first);
    }
    return work;
  }

  // Node-steps a baseline's cleanup may cost (CleanupWork): a constant, so
  // that small graphs clean every baseline up, and past it linear in nodes.
  size_t CleanupBudget() const {
    return std::max(kCleanupNodeSteps, kCleanupNodeStepsPerNode * context_.graph.nodes.size());
  }

  // A cleanup run, by the plan it started from.
  struct Cleaned {
    SaveSet from;
    CleanupResult result;
  };

  const SimContext& context_;
  const PlannerOptions& options_;
  const PeakFloor* floor_ = nullptr;
  const bool cleanup_;
  std::vector<Cleaned> cleaned_;
  bool always_fits_ = false;  // a plan added with Add (not AddBaseline) fits
  SimOptions sim_options_;
  PlannerResult best_;
  bool has_best_ = false;
  std::vector<PlannerResult> all_;  // every plan added, in order
  bool deferring_ = false;
  std::vector<Pending> pending_;  // plans added while deferring, in order
};

// The greedy's plan from `start`, named `method`, with the figures the
// greedy ends with: the step's, exactly (IncrementalPlan's RegionalMemory
// sums exact costs, whose order does not matter, and simulates the whole
// step where they are not exact; GreedyPlan simulates), so that the plan is
// not simulated again to be added. Verify mode simulates it and checks.
PlannerResult Greedy(const SimContext& context, const SaveSet& start, const PlannerOptions& options,
                     const Candidates& candidates, std::string method) {
  GreedyOptions greedy;
  greedy.budget_bytes = options.budget_bytes;
  greedy.reserve_bytes = options.reserve_bytes;
  greedy.prune = options.prune;
  greedy.verify = options.verify;
  const SaveSet from = DropSavedViews(context, start);
  GreedyResult found = options.reference_greedy ? GreedyPlan(context.graph, from, greedy)
                                                : IncrementalPlan(context, from, greedy);
  PlannerResult result =
      candidates.Result(std::move(found.keep), found.peak, found.recompute_cost, std::move(method));
  if (options.verify) {
    // Simulated here, not through Measure (which reads a plan added before).
    const PlannerResult measured = candidates.Measured(
        result.keep, Simulate(context, result.keep, candidates.sim_options()), result.method);
    if (measured.peak != result.peak || measured.recompute_cost != result.recompute_cost) {
      throw std::logic_error("planner: " + result.method + " ends at peak " +
                             std::to_string(result.peak) + ", cost " +
                             std::to_string(result.recompute_cost) + ", but its plan simulates to " +
                             std::to_string(measured.peak) + ", " +
                             std::to_string(measured.recompute_cost));
    }
  }
  return result;
}

// Every-k-th: the fitting segment plan of least cost, else the lowest peak
// (and, when `greedy_from_best`, the greedy from it). `floor`: the plans'
// peak floors, from the simulation of SaveAll under the candidates' options.
void AddBestSegments(const SimContext& context, const PlannerOptions& options,
                     const PeakFloor& floor, bool greedy_from_best, Candidates* candidates) {
  const Graph& graph = context.graph;
  const SegmentPlans plans(context);
  // Compared raw; only the chosen one is cleaned up (by `candidates`).
  Candidates segments(context, options, /*cleanup=*/false);
  const size_t affordable =
      std::max<size_t>(kMinSegments, kSegmentNodeSteps / std::max<size_t>(graph.nodes.size(), 1));
  const int most = static_cast<int>(std::min<size_t>({plans.forward(), kMaxSegments, affordable}));
  const auto since = std::chrono::steady_clock::now();
  auto name = [](int k) { return std::to_string(k) + " segments"; };
  // Where every plan cannot win (Candidates::CannotWin) none is searched:
  // only the best of them would join, and lose. (Not where the greedy
  // would run from the best of them.)
  if (!greedy_from_best && most >= 1) {
    bool hopeless = true;
    for (int k = 1; k <= most && hopeless; ++k) hopeless = candidates->CannotWin(plans.Plan(k));
    if (hopeless) {
      for (int k = 1; k <= most; ++k) candidates->LeftOut(plans.Plan(k), name(k));
      if (!options.verify) return;  // verify mode searches them all the same
    }
  }
  std::vector<std::optional<PlannerResult>> measured(static_cast<size_t>(std::max(most, 0)) + 1);
  int costs_read = 0;  // RecomputeCost
  if (!options.prune) {
    for (int k = 1; k <= most; ++k) measured[k] = segments.Measure(plans.Plan(k), name(k));
  } else {
    // Each plan's peak is at least its floor (sim/peak_floor.h, from the
    // save-all simulation). A plan whose floor is over the budget cannot
    // fit. The others are simulated in the order of their floors until one
    // fits; then only those of the rest that cost no more (RecomputeCost, a
    // fraction of a simulation), cheapest first: the others lose to it.
    // When none fits, one whose floor is over the lowest peak found cannot
    // have the lowest. The plans not simulated lose to the best.
    std::vector<std::pair<int64_t, int>> over, within;  // (floor, k): over the budget, not
    for (int k = 1; k <= most; ++k) {
      const int64_t at_least = floor.Of(plans.Plan(k));
      (at_least > options.budget_bytes ? over : within).emplace_back(at_least, k);
    }
    std::sort(within.begin(), within.end());
    bool fits = false;
    double fitting_cost = 0;  // the least cost of a plan found to fit
    size_t next = 0;
    for (; next < within.size() && !fits; ++next) {
      const int k = within[next].second;
      measured[k] = segments.Measure(plans.Plan(k), name(k));
      fits = measured[k]->fits;
      if (fits) fitting_cost = measured[k]->recompute_cost;
    }
    if (fits) {
      // In the order of a floor under their costs (RecomputeCostFloor, a
      // pass over the chains' forced nodes; a margin for its own order of
      // sums): the cost itself is read only for plans whose floor is not
      // over the least fitting cost, and those that cost no more are
      // simulated. Every plan of least cost is simulated, as before.
      std::vector<std::pair<double, int>> rest;  // (recompute cost floor, k)
      for (; next < within.size(); ++next) {
        const int k = within[next].second;
        rest.emplace_back(RecomputeCostFloor(context, plans.Plan(k)), k);
      }
      std::sort(rest.begin(), rest.end());
      const double margin = 1e-9 * context.step_cost;
      for (const auto& [at_least, k] : rest) {
        if (at_least > fitting_cost + margin) break;
        const double cost = RecomputeCost(context, plans.Plan(k), segments.sim_options());
        ++costs_read;
        if (cost > fitting_cost) continue;
        measured[k] = segments.Measure(plans.Plan(k), name(k));
        if (measured[k]->fits) fitting_cost = std::min(fitting_cost, cost);
      }
    }
    if (!fits) {
      int64_t lowest = std::numeric_limits<int64_t>::max();
      for (const auto& result : measured) {
        if (result) lowest = std::min(lowest, result->peak);
      }
      std::sort(over.begin(), over.end());
      for (const auto& [at_least, k] : over) {
        if (at_least > lowest) break;
        measured[k] = segments.Measure(plans.Plan(k), name(k));
        lowest = std::min(lowest, measured[k]->peak);
      }
    }
  }
  // In k order, as all were added before: ties keep the earlier plan.
  int simulated = 0;
  for (int k = 1; k <= most; ++k) {
    if (!measured[k]) continue;
    segments.AddMeasured(std::move(*measured[k]), since);
    ++simulated;
  }
  spdlog::debug("planner: {} segment plans, {} simulated, {} more costs read ({:.3f} s)", most,
                simulated, costs_read, SecondsSince(since));
  if (options.verify) {
    // The plans left out, simulated: each must lose to the best outright
    // (a tie would have kept the earlier plan).
    for (int k = 1; k <= most; ++k) {
      if (measured[k]) continue;
      const PlannerResult left = segments.Measure(plans.Plan(k), name(k));
      if (!Candidates::Better(segments.best(), left)) {
        throw std::logic_error("planner: " + name(k) + " was left out by its peak floor or its "
                               "recompute cost, but (peak " +
                               std::to_string(left.peak) + ", cost " +
                               std::to_string(left.recompute_cost) + ") does not lose to " +
                               segments.best().method);
      }
    }
  }
  const PlannerResult& best = segments.best();
  if (best.keep.empty()) return;
  // Measured above: not simulated again.
  candidates->AddBaselineMeasured(best, std::chrono::steady_clock::now());
  if (!best.fits && greedy_from_best) {
    const auto greedy_since = std::chrono::steady_clock::now();
    candidates->AddMeasured(
        Greedy(context, best.keep, options, *candidates, "greedy from " + best.method),
        greedy_since);
  }
}

// Nodes of the largest region: single flips (local search) and greedy drops
// simulate their region (the whole step when costs are not exact integers;
// see RegionalMemory).
size_t LargestRegion(const SimContext& context) {
  size_t largest = context.exact_costs ? 1 : context.graph.nodes.size();
  for (const Region& region : context.regions()) {
    largest = std::max<size_t>(largest, region.end - region.first);
  }
  return largest;
}

// RunsExtraGreedies, from the figures PlanDefault has at hand.
bool ExtraGreediesRun(size_t num_candidates, size_t largest_region) {
  return num_candidates <= kSecondStartLimit &&
         num_candidates * largest_region <= kSecondStartNodeSteps;
}

PlannerResult PlanDefault(const SimContext& context, const PlannerOptions& options) {
  const Graph& graph = context.graph;
  Candidates candidates(context, options);
  const size_t num_candidates = context.candidates.size();
  const size_t largest_region = LargestRegion(context);
  std::vector<std::string> starts{options.start};
  const bool extra_greedy = ExtraGreediesRun(num_candidates, largest_region);
  if (extra_greedy) starts.push_back(options.start == "mincut" ? "save-all" : "mincut");
  std::vector<SaveSet> start_sets;
  for (const std::string& start : starts) {
    const auto since = std::chrono::steady_clock::now();
    SaveSet set = StartSet(context, start, options.policy);
    // The greedy from an equal start ends at the same plan (the min cut often
    // saves every candidate when activations are small beside the peak).
    if (std::find(start_sets.begin(), start_sets.end(), set) != start_sets.end()) {
      spdlog::debug("planner: the {} start is an earlier start's set: not searched again", start);
      continue;
    }
    candidates.AddMeasured(Greedy(context, set, options, candidates, "greedy from " + start),
                           since);
    start_sets.push_back(std::move(set));
  }
  // Save-all, simulated once: the segment plans' floors read it too.
  const SimResult save_all = Simulate(context, SaveAll(graph), candidates.sim_options());
  const PeakFloor floor(context, save_all);
  // Local search starts from the best plan alone on such graphs.
  if (num_candidates > kManyStartsLimit) candidates.set_floor(&floor);
  // The baselines' cleanups, the most promising first (Flush).
  candidates.Defer();
  AddBestSegments(context, options, floor, extra_greedy, &candidates);
  candidates.AddMeasured(candidates.Measured(SaveAll(graph), save_all, "save-all"),
                         std::chrono::steady_clock::now());
  candidates.AddBaseline(ScopeCheckpointPlan(context), "scope-checkpoint");
  candidates.AddBaseline(SqrtSegmentsPlan(context), "sqrt-segments");
  candidates.AddBaseline(KnapsackPlan(context, options.budget_bytes, save_all), "knapsack");
  candidates.Flush();

  // Local search from the best few distinct plans (one on large graphs).
  LocalSearchOptions search;
  search.budget_bytes = options.budget_bytes;
  search.reserve_bytes = options.reserve_bytes;
  search.prune = options.prune;
  search.verify = options.verify;
  search.max_considered = std::clamp<size_t>(kLocalSearchNodeSteps / largest_region, 200,
                                             search.max_considered);
  const size_t search_starts = num_candidates <= kManyStartsLimit ? kLocalSearchStarts : 1;
  search.triple_limit = 0;
  for (const PlannerResult& start : candidates.Top(search_starts)) {
    const auto since = std::chrono::steady_clock::now();
    LocalSearchResult improved = ImprovePlan(context, start.keep, search);
    spdlog::debug("planner: local search from {}: {} moves ({:.3f} s)", start.method,
                  improved.moves,
                  SecondsSince(since));
    if (improved.moves > 0) candidates.Add(improved.keep, start.method + " + local search");
  }
  // Three-flip moves (small graphs only), from the best plan found.
  search.triple_limit = LocalSearchOptions().triple_limit;
  if (num_candidates <= search.triple_limit) {
    const PlannerResult best = candidates.best();
    LocalSearchResult improved = ImprovePlan(context, best.keep, search);
    if (improved.moves > 0) candidates.Add(improved.keep, best.method + " + local search");
  }
  return candidates.best();
}

}  // namespace

size_t NextFloorReading(size_t resaved, double floor,
                        const std::optional<std::pair<size_t, double>>& last, double to_reach) {
  const size_t doubled = std::max<size_t>(1, 2 * resaved);
  if (!last || last->first >= resaved || !(floor > last->second) || !(floor < to_reach)) {
    return doubled;
  }
  // Re-saves until the floor reaches to_reach, at its rise per re-save since
  // the last reading.
  const double rise = (floor - last->second) / static_cast<double>(resaved - last->first);
  const double more = std::ceil((to_reach - floor) / rise);
  const size_t soonest = resaved + std::max<size_t>(1, resaved / 16);
  if (!(more < static_cast<double>(doubled - resaved))) return doubled;
  return std::max(soonest, resaved + static_cast<size_t>(more));
}

bool RunsExtraGreedies(const SimContext& context) {
  return ExtraGreediesRun(context.candidates.size(), LargestRegion(context));
}

SaveSet StartSet(const Graph& graph, const std::string& start, const RecomputePolicy& policy) {
  return StartSet(SimContext(graph), start, policy);
}

SaveSet StartSet(const SimContext& context, const std::string& start,
                 const RecomputePolicy& policy) {
  if (start == "save-all") return SaveAll(context.graph);
  if (start == "mincut") return MinCutStart(context, policy).keep;
  throw InputError("unknown start set '" + start + "' (expected mincut or save-all)",
                   kExitUsage);
}

SaveSet DropSavedViews(const SimContext& context, SaveSet keep) {
  const Graph& graph = context.graph;
  std::vector<NodeId> stack;
  std::vector<uint8_t> seen(graph.nodes.size(), 0);
  std::vector<NodeId> visited;
  size_t dropped = 0;
  for (TensorId t : context.droppable) {
    const TensorId root = context.root[t];
    if (!keep[t] || root == t) continue;
    // t's recompute, as Simulate's chain walks it: from its producer
    // through the tensors a chain needs (SimContext::Unsaved).
    bool views = true, held = false;
    stack.assign(1, context.producer[t]);
    visited.clear();
    while (!stack.empty() && views) {
      const NodeId n = stack.back();
      stack.pop_back();
      if (seen[n]) continue;
      seen[n] = 1;
      visited.push_back(n);
      views = context.node_workspace[n] == 0;
      for (TensorId out : graph.nodes[n].outputs) {
        views = views && context.root[out] == root &&
                context.made[out] == SimContext::Made::kAlias;
      }
      for (TensorId in : graph.nodes[n].inputs) {
        if (context.resident_root[in]) continue;
        if (context.root[in] != root) {
          views = false;
        } else if (context.Unsaved(in, keep)) {
          stack.push_back(context.producer[in]);
        } else {
          held = held || (context.is_candidate[in] && keep[in]);
        }
      }
    }
    for (NodeId n : visited) seen[n] = 0;
    if (views && held) {
      keep[t] = 0;
      ++dropped;
    }
  }
  if (dropped > 0) spdlog::debug("planner: {} saved views of saved storages dropped", dropped);
  return keep;
}

PlannerResult PlanGraph(const Graph& graph, const PlannerOptions& options) {
  const SimContext context(graph);
  if (context.droppable.size() < context.candidates.size()) {
    spdlog::info("planner: {} of {} candidates always saved: recomputing them would re-run a "
                 "random op", context.candidates.size() - context.droppable.size(),
                 context.candidates.size());
  }
  Candidates one(context, options);
  PlannerResult result;
  switch (options.strategy) {
    case Strategy::kCkptplan:
      result = PlanDefault(context, options);
      break;
    case Strategy::kGreedy:
      one.AddMeasured(Greedy(context, StartSet(context, options.start, options.policy), options,
                             one, "greedy from " + options.start),
                      std::chrono::steady_clock::now());
      result = one.best();
      break;
    case Strategy::kSaveAll:
      result = one.Measure(SaveAll(graph), "save-all");
      break;
    case Strategy::kScopeCheckpoint:
      result = one.Measure(ScopeCheckpointPlan(context), "scope-checkpoint");
      break;
    case Strategy::kSqrtSegments:
      result = one.Measure(SqrtSegmentsPlan(context), "sqrt-segments");
      break;
    case Strategy::kKnapsack:
      result = one.Measure(KnapsackPlan(context, options.budget_bytes, options.reserve_bytes),
                           "knapsack");
      break;
  }
  spdlog::info("planner: {}: {}, peak {} bytes (budget {}), recompute cost {}",
               ToString(options.strategy), result.method, result.peak, options.budget_bytes,
               result.recompute_cost);
  return result;
}

}  // namespace ckptplan
