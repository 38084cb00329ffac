// `plan` and `simulate` under a parallel layout (--dp, --zero, ...): the
// graph is turned into one graph per distinct rank (dist/layout.h), and each
// is simulated and planned unchanged.
#ifndef CKPTPLAN_CLI_DISTRIBUTED_H_
#define CKPTPLAN_CLI_DISTRIBUTED_H_

#include <ostream>
#include <string>

#include "ckptplan/cli/commands.h"

namespace ckptplan {

/// RunPlan for a layout that is not one device: one plan per pipeline
/// stage, made on the stage's rank with the highest save-all peak and
/// simulated on every rank of the stage; it fits when every rank fits.
int RunDistributedPlan(const PlanOptions& options, const PlannerOptions& planner,
                       std::ostream& out);
/// RunSimulate for a layout that is not one device.
int RunDistributedSimulate(const SimulateOptions& options, std::ostream& out);
/// `sweep --search-parallel`: every layout of `gpus` ranks (pp dividing
/// gpus, at most the layers and at most 8; tp 1, 2, 4 or 8 dividing the rest,
/// with --sp when above 1; dp = gpus / (pp tp); ZeRO 0-3; 1f1b with as many
/// microbatches as stages) planned at planner.budget_bytes per rank;
/// prints those that fit, least recompute overhead first.
int RunParallelSearch(const SweepOptions& options, const PlannerOptions& planner, int gpus,
                      std::ostream& out);

/// The flag that sets a ParallelLayout field ("zero_partition" ->
/// "--zero-partition", "bucket_cap_bytes" -> "--bucket-cap"): the CLI's
/// ParallelLayout::field_name.
std::string LayoutFlagName(const std::string& field);

}  // namespace ckptplan

#endif  // CKPTPLAN_CLI_DISTRIBUTED_H_
