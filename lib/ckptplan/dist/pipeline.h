// Pipeline parallelism: one stage's step as its schedule unrolled over the
// microbatches, so the activations in flight are the ones the schedule holds.
#ifndef CKPTPLAN_DIST_PIPELINE_H_
#define CKPTPLAN_DIST_PIPELINE_H_

#include <string>
#include <vector>

#include "ckptplan/dist/layout.h"
#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// Which pipeline stage each node of the one-microbatch graph runs on
/// (optimizer nodes: -1, every stage runs its part). Layers are the module
/// scopes "<name>.<index>" (h.0, layers.3, ...), split evenly, the earlier
/// stages taking one more when they do not divide. Other forward nodes go to
/// the first stage before the first layer (embeddings) and to the last after
/// it (final norm, head, loss); other backward nodes to the last stage of the
/// forward tensors they read, else of the parameters they read, else of the
/// node that made their first input, else the last stage.
/// Throws InputError when the graph has fewer layers than `stages`.
std::vector<int> AssignStages(const Graph& graph, int stages);

/// One step of a stage's schedule: microbatch `microbatch`'s forward or backward.
struct ScheduleSlot {
  bool forward;
  int microbatch;
};
/// gpipe: every forward, then every backward. 1f1b: min(p - s - 1, m)
/// forwards, then one forward and one backward alternating, then the
/// remaining backwards.
std::vector<ScheduleSlot> StageSchedule(const std::string& schedule, int stages, int stage,
                                        int microbatches);

/// Stage `stage`'s graph: its nodes per microbatch in schedule order, with
/// a `pp_recv` node making the activations received from the previous stage
/// (and, in backward, the gradients from the next one), a `pp_send` node
/// reading what it sends, and its own optimizer part at the end. Without
/// --pp-free-outputs the sent activations stay live until that
/// microbatch's backward has run (a `pp_send_release` node reads them last:
/// Megatron passes them to the backward call).
/// Parameters are the ones the stage's nodes read; TrainingState's extra
/// bytes are scaled by the stage's share of the parameter bytes.
Graph StageGraph(const Graph& graph, const ParallelLayout& layout, int stage,
                 const std::vector<int>& stage_of_node);

}  // namespace ckptplan

#endif  // CKPTPLAN_DIST_PIPELINE_H_
