// What each CLI subcommand does, behind the flags. apps/ only parses flags
// into these structs and maps the returned code to the process exit code.
#ifndef CKPTPLAN_COMMANDS_H_
#define CKPTPLAN_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ckptplan/cli/flags.h"
#include "ckptplan/emit/export.h"
#include "ckptplan/dist/layout.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/plan/plan_outcome.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/ir/synth.h"

namespace ckptplan {

struct CommonOptions {
  std::string graph_path;
  LoadFlags load;
  std::optional<int64_t> reserve_bytes;  ///< unset: 0, or the plan's (simulate --plan)
  bool json = false;          ///< summary as JSON on stdout
  std::string timeline_path;  ///< empty: none
  std::string report_path;        ///< HTML report; empty: none
  std::string trace_path;         ///< Chrome Trace Event / Perfetto JSON; empty: none
  std::string timeline_csv_path;  ///< CSV timeline; empty: none
  size_t top = 10;            ///< tensors listed at the peak
  ParallelLayout layout;      ///< --dp, --zero, ...: one device by default
};

/// How plans are searched for (see planner.h and recompute_policy.h).
struct SearchFlags {
  Strategy strategy = Strategy::kCkptplan;
  std::string start = "mincut";       ///< greedy start: mincut or save-all
  std::string policy_path;            ///< recompute policy file; empty: the default list
  std::string recomputable_ops;       ///< comma-separated ops added to the policy
};

struct PlanOptions : CommonOptions, SearchFlags {
  std::optional<int64_t> budget_bytes;  ///< required
  std::string output_path;  ///< plan file; empty: none
  /// Greedy implementation: "incremental" (default) or "reference"
  /// (GreedyPlan); same plans, the reference is slower. For debugging.
  std::string planner = "incremental";
  /// Print "timings: ..." (seconds, the peak reached in bytes, peak RSS) to stderr.
  bool timings = false;
  /// Offload (sim/offload.h) is considered when a host link is known: this
  /// rate (bytes/s, each direction), else the --device preset's when
  /// --device is given. Unset and no device: plans are recompute-only.
  std::optional<double> host_link_bytes_per_s;
  std::optional<int64_t> host_budget_bytes;  ///< host bytes offloads may hold
  /// FLOP/s timing nodes without time_us; unset: the device's 16-bit matrix rate.
  std::optional<double> compute_flops_per_s;
  /// Bound on the estimated relative gradient error of approximate recompute
  /// (approx_planner.h); 0: exact plans.
  double max_error = 0;
};

struct SweepOptions : CommonOptions, SearchFlags {
  std::vector<int64_t> budgets;  ///< every budget to plan, bytes
};

struct SimulateOptions : CommonOptions {
  std::string plan_path;  ///< apply this plan; empty: save everything
};

/// `generate`: writes a synthetic graph (synth.h) as graph JSON.
struct GenerateOptions {
  std::string kind;         ///< "transformer" or "random"
  TransformerOptions transformer;
  RandomGraphOptions random;
  std::string output_path;  ///< required
};

struct ExportOptions {
  std::string plan_path;
  std::string graph_path;   ///< empty: the graph file the plan names
  ExportTarget target = ExportTarget::kPytorchSac;
  std::string output_path;  ///< empty: stdout
  LoadFlags load;  ///< overrides the plan's recorded "load"
};
/// Each returns an ExitCode and writes the summary to `out`. Bad input throws
/// InputError / IoError; an infeasible budget throws InfeasibleError. Output
/// files are written only on success, atomically.
int RunPlan(const PlanOptions& options, std::ostream& out);
int RunSimulate(const SimulateOptions& options, std::ostream& out);
int RunSweep(const SweepOptions& options, std::ostream& out);
/// `sweep --search-parallel --gpus G --budget B` (distributed.h).
int RunSweepParallel(const SweepOptions& options, int gpus, int64_t budget_bytes,
                     std::ostream& out);
int RunGenerate(const GenerateOptions& options, std::ostream& out);
/// Writes the framework's file to output_path (report on `out`) or, without
/// one, the file on `out` and the report on `err`.
int RunExport(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ckptplan

#endif  // CKPTPLAN_COMMANDS_H_
