// Pipeline parallelism: one stage's step as its schedule unrolled over the
// microbatches, so the activations in flight are the ones the schedule holds.
#ifndef CKPTPLAN_DIST_PIPELINE_H_
#define CKPTPLAN_DIST_PIPELINE_H_

#include <string>
#include <vector>

#include "ckptplan/dist/layout.h"
#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

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

/// One step of a stage's schedule: microbatch `microbatch`'s forward or
/// backward of the rank's model chunk `chunk` (0 unless interleaved).
struct ScheduleSlot {
  bool forward;
  int microbatch;
  int chunk;
};
/// gpipe: every forward, then every backward. 1f1b: min(p - s - 1, m)
/// forwards, then one forward and one backward alternating, then the
/// remaining backwards. interleaved (Megatron's, `chunks` = V model chunks
/// per rank, m a multiple of p): the same over the m V chunk-microbatches,
/// with min((p - s - 1) 2 + (V - 1) p, m V) warm-up forwards; the k-th
/// forward is microbatch (k / (p V)) p + k % p of chunk (k / p) % V, the
/// k-th backward the same microbatch of chunk V - 1 - (k / p) % V.
std::vector<ScheduleSlot> StageSchedule(const std::string& schedule, int stages, int stage,
                                        int microbatches, int chunks = 1);

/// Stage `stage`'s graph: its nodes per microbatch in schedule order (with
/// the interleaved schedule `stage_of_node` holds virtual stages, chunk c of
/// rank s being virtual stage c p + s), with
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

/// The microbatches a stage's plan is searched on (speed; the plan is then
/// spread to every microbatch by UniformPlan and checked by simulating the
/// full schedule). 1F1B repeats one pattern after its warm-up of
/// w = min(p - s - 1, m) forwards, so w + 3 microbatches hold each situation
/// of the full step: the first backward with the most in flight, a backward
/// accumulating into the gradients with the most in flight (the steady
/// state), and the cooldown. Relies on the schedule rule above
/// (StageSchedule) and on each microbatch's copy of the graph being alike.
/// GPipe holds every microbatch in flight: m.
int PlanningMicrobatches(const ParallelLayout& layout, int stage);

/// Spreads a save set of `small` (a stage graph built with fewer
/// microbatches, same layout otherwise) onto `full`, one decision for every
/// microbatch, as frameworks apply checkpointing: a tensor "mb<k>.<name>" of
/// `full` is saved when every copy "mb<j>.<name>" in `small` is saved; a
/// tensor without a microbatch prefix takes its namesake's decision.
/// Tensors without a counterpart are saved.
SaveSet UniformPlan(const Graph& small, const SaveSet& keep, const Graph& full);

}  // namespace ckptplan

#endif  // CKPTPLAN_DIST_PIPELINE_H_
