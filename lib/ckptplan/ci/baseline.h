// The memory baseline file (schemas/baseline.schema.json): the figures
// `ckptplan check` compares a graph's peak against, one entry per graph key,
// committed next to the models it guards.
#ifndef CKPTPLAN_BASELINE_H_
#define CKPTPLAN_BASELINE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// A storage live at the peak, named as the graph names it.
struct PeakTensor {
  std::string tensor;
  int64_t bytes = 0;
  Category category = Category::kTemporaries;
  std::string node;  ///< producer; empty for graph inputs
  std::string op;
  std::string scope;
};

/// The figures of one graph's checked simulation: the plan's, or save-all's
/// under --no-plan. Built from a SimResult now, or read from a baseline.
struct PeakRecord {
  std::string graph;         ///< graph path as given
  std::string graph_sha256;  ///< digest of the graph file's bytes
  std::string mode;          ///< "plan" or "save-all"
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t save_all_peak_bytes = 0;
  std::string cost_unit;      ///< "flop" or "us"
  double recompute_cost = 0;  ///< in cost_unit; 0 under save-all
  // Where the peak is: the first step that reaches it.
  uint32_t peak_step = 0;
  std::string peak_node, peak_op, peak_scope, peak_phase;
  bool peak_recompute = false;
  CategoryBytes breakdown{};            ///< bytes per category at the peak
  std::vector<PeakTensor> top_tensors;  ///< largest live at the peak, largest first
};

/// Storages the baseline records per graph: enough to say which tensors grew.
inline constexpr size_t kBaselineTopTensors = 20;

/// Figures of `sim` for `graph`; `top` largest tensors at the peak.
PeakRecord MakePeakRecord(const Graph& graph, const SimResult& sim, size_t top);

/// Graph key -> figures, sorted by key so the file is byte-stable.
using Baseline = std::map<std::string, PeakRecord>;

/// Parses a baseline file's text; `source` names it in messages. Collects
/// every problem and throws one InputError (exit 4) listing them.
Baseline ParseBaseline(std::string_view text, const std::string& source);
/// Reads `path`. A missing or unreadable file throws IoError naming it.
Baseline ReadBaseline(const std::string& path);
/// The file's text: 2-space JSON with a trailing newline.
std::string BaselineText(const Baseline& baseline);

/// Category from its ToString name; false when unknown.
bool ParseCategory(std::string_view name, Category* category);

}  // namespace ckptplan

#endif  // CKPTPLAN_BASELINE_H_
