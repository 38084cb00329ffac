// The self-contained HTML memory report: stacked area charts of memory per
// step by category (planned and save-all) with the budget line and phases,
// the peak's breakdown, the largest tensors live at the peak, the decisions,
// and an optional budget sweep curve. No network access: no external
// scripts, styles, fonts or images. Every number comes from a SimResult
// simulated with record_categories; nothing here accounts memory itself.
#ifndef CKPTPLAN_REPORT_HTML_H_
#define CKPTPLAN_REPORT_HTML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// One point of a budget sweep (`ckptplan sweep`).
struct SweepPoint {
  int64_t budget_bytes = 0;
  int64_t peak_bytes = 0;     ///< peak of the plan found; infeasible: the lowest reached
  double recompute_cost = 0;  ///< in the graph's cost unit
  bool feasible = false;      ///< a plan fits the budget
};

/// Steps of a memory curve reduced to at most `max_buckets` buckets of
/// consecutive steps. Each bucket is represented by its step with the highest
/// total (the first such), so the stacked categories still add up to a real
/// step's total and the overall peak step is always kept: the curve's maximum
/// is exactly the simulation's peak.
struct Downsampled {
  std::vector<uint32_t> first_step;  ///< per bucket: first step it covers
  std::vector<uint32_t> step;        ///< per bucket: the step drawn
};
Downsampled DownsampleByMax(const SimResult& sim, size_t max_buckets);

struct HtmlReportInput {
  std::string command;  ///< "plan", "simulate" or "sweep"
  std::string graph_path;
  int64_t budget_bytes = -1;  ///< -1: no budget line
  int64_t reserve_bytes = 0;
  /// Both simulated with record_categories; may be null for a sweep-only
  /// report. `planned` may equal `save_all` (simulate without a plan).
  const SimResult* save_all = nullptr;
  const SimResult* planned = nullptr;
  const SaveSet* keep = nullptr;  ///< required with `planned`
  size_t top = 10;                ///< tensors listed at the peak
  std::vector<SweepPoint> sweep;  ///< empty: no sweep section
  /// With offloaded tensors: the rewrite `graph` and `planned` are of. Adds
  /// the copy lanes under the planned chart (one row per direction, each copy
  /// a bar from its start to its end on the step axis, CopySlices) and a
  /// table of the offloaded tensors.
  const OffloadedGraph* offloaded = nullptr;
  /// The plan's approximations (approx_planner.h): the recompute cost is
  /// then the approximate one, beside the exact one, and approximated chains
  /// are marked. nullptr or none chosen: the page is as without.
  const ApproxPlan* approx = nullptr;
};

/// The whole page. Deterministic: same input, same bytes. Throws
/// std::logic_error when a SimResult lacks per-category records.
std::string RenderHtmlReport(const Graph& graph, const HtmlReportInput& input);

/// The sweep section alone (heading, SVG curve of recompute cost against
/// budget with infeasible budgets marked, and the points' table), sorted by
/// budget; for embedding in other pages. `cost_unit` labels the cost axis.
std::string SweepSectionHtml(const std::vector<SweepPoint>& points, CostUnit cost_unit);

}  // namespace ckptplan

#endif  // CKPTPLAN_REPORT_HTML_H_
