// Fuzzes the JSON graph loader, then plans and reports every graph it
// accepts: an accepted graph must simulate, plan, print and round-trip its
// plan file without a crash, an overflow or a hang, and the incremental
// planner must pick the reference greedy's drops, also on four copies of the
// graph run one after another (regions that share searches and trials), and
// the cleanup must re-save what a plain re-simulating cleanup does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../test_graphs.h"
#include "ckptplan/plan/cleanup.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/plan/incremental.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/emit/report.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/sim/simulator.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Graph graph;
  try {
    graph = ParseJsonGraph(text, "fuzz.json");
  } catch (const InputError&) {
    return 0;
  }
  SimOptions options;
  options.record_categories = true;
  const SimResult save_all = Simulate(graph, SaveAll(graph), options);
  const LowerBound bound = ComputeLowerBound(graph, 0);
  GreedyOptions greedy_options;
  greedy_options.budget_bytes = bound.bytes;
  const GreedyResult greedy = GreedyPlan(graph, SaveAll(graph), greedy_options);
  // The selector's contract: a drop never raises the peak.
  if (greedy.peak > greedy.start_peak) __builtin_trap();
  const SimResult planned = Simulate(graph, greedy.keep, options);
  if (planned.peak_bytes != greedy.peak) __builtin_trap();
  if (IncrementalPlan(graph, SaveAll(graph), greedy_options).drops != greedy.drops) {
    __builtin_trap();
  }
  // The greedy's plan, cleaned up at its own peak and halfway to save-all.
  for (int64_t budget : {greedy.peak, greedy.peak + (save_all.peak_bytes - greedy.peak) / 2}) {
    if (ResaveDropped(graph, greedy.keep, budget, 0).keep !=
        testing::PlainCleanup(graph, greedy.keep, budget)) {
      __builtin_trap();
    }
  }
  if (graph.nodes.size() <= 64) {
    const Graph copies = testing::Copies(graph, 4);
    GreedyOptions copies_options;
    copies_options.budget_bytes = ComputeLowerBound(copies, 0).bytes;
    const GreedyResult reference = GreedyPlan(copies, SaveAll(copies), copies_options);
    if (IncrementalPlan(copies, SaveAll(copies), copies_options).drops != reference.drops) {
      __builtin_trap();
    }
  }

  Summary summary{"plan", "fuzz.json", bound.bytes, 0, &save_all, &planned, &greedy.keep,
                  bound, 10};
  std::string printed = SummaryText(graph, summary) + SummaryJson(graph, summary).dump();
  printed += TimelineJson(graph, planned).dump();
  PlanRecord record{"fuzz.json", "", bound.bytes, 0, "save-all", nullptr, &save_all, &planned,
                    &greedy.keep, bound};
  const std::string plan_text = PlanToJson(graph, record).dump(2);
  // The plan file we write must read back as the same plan.
  const LoadedPlan back = ParsePlan(graph, plan_text, "fuzz-plan.json");
  for (TensorId t : SaveCandidates(graph)) {
    if ((back.keep[t] != 0) != (greedy.keep[t] != 0)) __builtin_trap();
  }
  return 0;
}
