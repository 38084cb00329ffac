// Quality benchmark: total step cost of every strategy relative to ckptplan's
// default plan, and on small graphs to the exhaustive optimum, at budgets
// from 40% to 90% of each graph's save-all peak. Prints a table and the
// "done when" checks of issue 4; exits 1 when a check fails.
//
// Usage: ckptplan_bench_quality SAMPLE_GRAPHS_DIR
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench_quality/exhaustive.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/plan/strategies.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/ir/synth.h"

namespace {

using namespace ckptplan;

// Graphs with at most this many candidates are also solved exhaustively.
constexpr size_t kSmallCandidates = 18;

struct NamedGraph {
  std::string name;
  Graph graph;
};

std::vector<NamedGraph> BenchGraphs(const std::string& samples) {
  std::vector<NamedGraph> graphs;
  for (const char* file : {"diamond.json", "mlp.json", "transformer_block.json"}) {
    graphs.push_back({file, LoadGraph(samples + "/" + file, {}).graph});
  }
  for (int layers : {1, 2}) {
    TransformerOptions t;
    t.layers = layers;
    t.batch = 4;
    t.seq = 256;
    t.hidden = 64;
    t.heads = 2;
    t.vocab = 512;
    graphs.push_back({"transformer-" + std::to_string(layers) + "L", TransformerGraph(t)});
  }
  for (uint64_t seed : {1, 2, 3, 4, 7, 8}) {
    RandomGraphOptions r;
    r.seed = seed;
    r.layers = 4;
    r.width = 2;
    r.param_probability = 0.2;
    r.optimizer = false;
    graphs.push_back({"random-" + std::to_string(seed), RandomTrainingGraph(r)});
  }
  for (uint64_t seed : {11, 12, 13, 14, 15, 16}) {
    RandomGraphOptions r;
    r.seed = seed;
    r.layers = 6;
    r.width = 3;
    r.max_inputs = 3;
    r.param_probability = 0.2;
    r.optimizer = false;
    graphs.push_back({"random-" + std::to_string(seed), RandomTrainingGraph(r)});
  }
  for (uint64_t seed : {5, 6}) {
    RandomGraphOptions r;
    r.seed = seed;
    r.layers = 10;
    r.width = 3;
    r.param_probability = 0.2;
    r.optimizer = false;
    graphs.push_back({"random-big-" + std::to_string(seed), RandomTrainingGraph(r)});
  }
  for (int levels : {2, 3, 4, 5}) {
    UNetOptions u;
    u.levels = levels;
    u.optimizer = false;
    graphs.push_back({"unet-" + std::to_string(levels), UNetGraph(u)});
  }
  return graphs;
}

struct Checks {
  int fit_failures = 0;      // a baseline or the optimum fits, ckptplan does not
  int cost_failures = 0;     // a baseline fits cheaper than ckptplan
  double log_ratio_sum = 0;  // ckptplan / optimum, over small graphs
  int ratio_count = 0;
  double worst_ratio = 1;
};

double Percent(int64_t part, int64_t whole) {
  return ckptplan::Percent(static_cast<double>(part), static_cast<double>(whole));
}

// Lowest peak each search reaches when asked for the lower bound itself.
void ReachRow(const NamedGraph& named) {
  const Graph& graph = named.graph;
  const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
  const LowerBound bound = ComputeLowerBound(graph, 0);
  GreedyOptions greedy;
  greedy.budget_bytes = bound.bytes;
  const int64_t plain = GreedyPlan(graph, SaveAll(graph), greedy).peak;
  PlannerOptions options;
  options.budget_bytes = bound.bytes;
  const int64_t ours = PlanGraph(graph, options).peak;
  std::printf("%-22s %11.1f%% %11.1f%% %11.1f%%", named.name.c_str(),
              Percent(bound.bytes, save_all), Percent(plain, save_all), Percent(ours, save_all));
  if (SaveCandidates(graph).size() <= kSmallCandidates) {
    std::printf(" %11.1f%%\n", Percent(ExhaustiveFront(graph, 0).front().peak, save_all));
  } else {
    std::printf(" %12s\n", "n/a");
  }
}

void Cell(const PlannerResult& plan, double step_cost, double reference) {
  if (!plan.fits) {
    std::printf(" %9s", "-");
  } else {
    std::printf(" %9.3f", (step_cost + plan.recompute_cost) / reference);
  }
}

void BenchGraph(const NamedGraph& named, Checks* checks) {
  const Graph& graph = named.graph;
  const size_t k = SaveCandidates(graph).size();
  SimOptions sim_options;
  SimResult save_all = Simulate(graph, SaveAll(graph), sim_options);
  const double step_cost = save_all.step_cost;
  const LowerBound bound = ComputeLowerBound(graph, 0);
  std::vector<FrontPoint> front;
  const bool small = k <= kSmallCandidates;
  if (small) front = ExhaustiveFront(graph, 0);
  for (int percent = 40; percent <= 90; percent += 10) {
    const int64_t budget = save_all.peak_bytes * percent / 100;
    if (budget < bound.bytes) {
      // No plan can fit; the exhaustive search agrees (checked, not printed).
      if (small && CheapestUnder(front, budget) != nullptr) ++checks->fit_failures;
      continue;
    }
    PlannerOptions options;
    options.budget_bytes = budget;
    std::vector<PlannerResult> plans;
    for (Strategy s : AllStrategies()) {
      options.strategy = s;
      plans.push_back(PlanGraph(graph, options));
    }
    const PlannerResult& ours = plans[0];
    const FrontPoint* optimum = small ? CheapestUnder(front, budget) : nullptr;
    const double reference = ours.fits ? step_cost + ours.recompute_cost
                             : optimum ? step_cost + optimum->recompute_cost
                                       : step_cost;
    std::printf("%-22s %4zu %4d%% %5.0f%% %s", named.name.c_str(), k, percent,
                Percent(ours.peak, save_all.peak_bytes),
                ours.fits ? "yes" : "NO ");
    for (const PlannerResult& plan : plans) Cell(plan, step_cost, reference);
    if (!small) {
      std::printf(" %9s", "n/a");
    } else if (optimum == nullptr) {
      std::printf(" %9s", "-");
    } else {
      std::printf(" %9.3f", (step_cost + optimum->recompute_cost) / reference);
    }
    std::printf("  %s\n", ours.fits ? ours.method.c_str() : "");
    for (size_t i = 1; i < plans.size(); ++i) {
      if (plans[i].fits && !ours.fits) ++checks->fit_failures;
      if (plans[i].fits && ours.fits && plans[i].recompute_cost < ours.recompute_cost) {
        ++checks->cost_failures;
      }
    }
    if (optimum != nullptr) {
      if (!ours.fits) {
        ++checks->fit_failures;
        continue;
      }
      double ratio = (step_cost + ours.recompute_cost) / (step_cost + optimum->recompute_cost);
      checks->log_ratio_sum += std::log(ratio);
      ++checks->ratio_count;
      checks->worst_ratio = std::max(checks->worst_ratio, ratio);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SAMPLE_GRAPHS_DIR\n", argv[0]);
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  auto start = std::chrono::steady_clock::now();
  std::printf(
      "Total step cost (forward + backward + recompute) relative to ckptplan's plan. '-': the\n"
      "strategy does not fit the budget. greedy: one greedy run from the min-cut start + cleanup;\n"
      "optimum: exhaustive search (graphs with <= %zu candidates). budg and peak: %% of the\n"
      "save-all peak; budgets below the graph's lower bound are left out.\n\n",
      kSmallCandidates);
  std::printf("%-22s %4s %5s %6s %3s", "graph", "cand", "budg", "peak", "fit");
  for (Strategy s : AllStrategies()) {
    std::string name(ToString(s));
    if (name.size() > 9) name = name.substr(0, 9);
    std::printf(" %9s", name.c_str());
  }
  std::printf(" %9s  %s\n", "optimum", "ckptplan's winning search");
  Checks checks;
  const std::vector<NamedGraph> graphs = BenchGraphs(argv[1]);
  for (const NamedGraph& graph : graphs) BenchGraph(graph, &checks);
  std::printf(
      "\nReach: lowest peak found when asked for the lower bound (%% of save-all peak)\n\n");
  std::printf("%-22s %12s %12s %12s %12s\n", "graph", "lower bound", "plain greedy", "ckptplan",
              "optimum");
  for (const NamedGraph& graph : graphs) ReachRow(graph);
  double geomean = checks.ratio_count ? std::exp(checks.log_ratio_sum / checks.ratio_count) : 1;
  bool ok = checks.fit_failures == 0 && checks.cost_failures == 0 && geomean <= 1.02;
  std::printf("\nchecks:\n");
  std::printf("  budgets where a baseline or the optimum fits but ckptplan does not: %d\n",
              checks.fit_failures);
  std::printf("  budgets where a baseline is cheaper than ckptplan: %d\n", checks.cost_failures);
  std::printf("  ckptplan / optimum over %d small-graph budgets: geomean %.4f, worst %.4f\n",
              checks.ratio_count, geomean, checks.worst_ratio);
  std::printf("  %s\n", ok ? "PASS" : "FAIL");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "bench_quality: %.1f s\n", seconds);
  return ok ? 0 : 1;
}
