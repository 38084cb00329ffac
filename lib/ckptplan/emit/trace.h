// The memory timeline in formats other tools open: a Chrome Trace Event /
// Perfetto JSON trace and a CSV table. Both take every number from a
// SimResult simulated with record_categories.
#ifndef CKPTPLAN_TRACE_H_
#define CKPTPLAN_TRACE_H_

#include <string>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// Trace Event JSON ({"traceEvents": [...], "displayTimeUnit": "ms"}), one
/// event per line. Time is the step index: step s runs from ts = s to s + 1
/// microseconds (real costs are in each slice's args). Per step, one "memory"
/// counter event ("ph": "C") with a key per category plus "total" (bytes), and
/// one slice ("ph": "X") on the lane of its kind: forward, backward,
/// recompute or optimizer, each lane a thread named by a metadata event.
/// `label` names the process ("planned", "save-all"). With `offloaded` (whose
/// rewrite is `graph` and `sim` its simulation) that offloads something, two
/// more lanes, "copy to host" and "copy to device": each copy a slice from
/// its start to its end on the step axis (CopySlices), named by its tensor,
/// with its bytes, host bytes and the model's start and end times (us) in
/// args. Throws std::logic_error when `sim` lacks per-category records.
std::string TraceJson(const Graph& graph, const SimResult& sim, const std::string& label,
                      const OffloadedGraph* offloaded = nullptr);

/// CSV with a header row and one row per step: step, node, op, phase,
/// recompute, one column of bytes per category, total. Fields are quoted
/// (RFC 4180) when they hold a comma, quote or line break.
std::string TimelineCsv(const Graph& graph, const SimResult& sim);

}  // namespace ckptplan

#endif  // CKPTPLAN_TRACE_H_
