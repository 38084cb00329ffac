// What each CLI subcommand does, behind the flags. apps/ only parses flags
// into these structs and maps the returned code to the process exit code.
#ifndef CKPTPLAN_COMMANDS_H_
#define CKPTPLAN_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "ckptplan/loader.h"
#include "ckptplan/selector.h"
#include "ckptplan/simulator.h"

namespace ckptplan {

struct CommonOptions {
  std::string graph_path;
  LoadOptions load;
  int64_t reserve_bytes = 0;
  bool json = false;          ///< summary as JSON on stdout
  std::string timeline_path;  ///< empty: none
  std::string report_path;        ///< HTML report; empty: none
  std::string trace_path;         ///< Chrome Trace Event / Perfetto JSON; empty: none
  std::string timeline_csv_path;  ///< CSV timeline; empty: none
  size_t top = 10;            ///< tensors listed at the peak
};

struct PlanOptions : CommonOptions {
  int64_t budget_bytes = -1;
  std::string output_path;  ///< plan file; empty: none
  std::string start = "save-all";
};

struct SimulateOptions : CommonOptions {
  std::string plan_path;  ///< apply this plan; empty: save everything
};

struct ExportOptions {
  std::string plan_path;
  std::string graph_path;   ///< empty: the graph file the plan names
  std::string target;       ///< pytorch-sac, jax, megatron, torchtitan, deepspeed
  std::string output_path;  ///< empty: stdout
  LoadOptions load;
};
/// The planning path `plan` and `check` share: the greedy selector from
/// `start` down to `budget_bytes`, then save-all and the plan simulated with
/// categories recorded. Never throws for an unreachable budget: `infeasible`
/// says why instead.
struct PlanOutcome {
  LowerBound bound;
  GreedyResult greedy;
  SimResult save_all;
  SimResult planned;       ///< simulation of greedy.keep (the best found if it does not fit)
  std::string infeasible;  ///< why no plan fits the budget; empty when greedy.fits
};
PlanOutcome ComputePlan(const Graph& graph, const SaveSet& start, int64_t budget_bytes,
                        int64_t reserve_bytes);

/// Each returns an ExitCode and writes the summary to `out`. Bad input throws
/// InputError / IoError; an infeasible budget throws InfeasibleError. Output
/// files are written only on success, atomically.
int RunPlan(const PlanOptions& options, std::ostream& out);
int RunSimulate(const SimulateOptions& options, std::ostream& out);
/// Writes the framework's file to output_path (report on `out`) or, without
/// one, the file on `out` and the report on `err`.
int RunExport(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ckptplan

#endif  // CKPTPLAN_COMMANDS_H_
