"""Plans in the terms of framework policies other tools run.

PyTorch 2.4+ selective activation checkpointing: `sac_context_fn(plan,
graph)` returns a context_fn for torch.utils.checkpoint.checkpoint whose
policy_fn saves an op's output when the plan saves it, keyed by (aten op,
call index among forward calls of that op): the keys `ckptplan export --to
pytorch-sac` writes (sac_policy_from_export reads them). Such a policy is not
the plan's exact program (the checkpoint region decides when recomputation
runs): to run a plan exactly, use ckptplan_torch.apply_plan.
"""

import torch
import torch.utils.checkpoint

from .apply import load_plan


def plan_actions(plan):
    """{tensor name: "save" | "recompute"} from a plan (path or dict)."""
    return {d["tensor"]: d["action"] for d in load_plan(plan)["decisions"]}


# --------------------------------------------------------------------------
# Selective activation checkpointing policy (PyTorch 2.4+).


def sac_policy(plan, graph):
    """{(op, call index): save?} over the graph's forward nodes."""
    actions = plan_actions(plan)
    counts = {}
    policy = {}
    for node in graph["nodes"]:
        if node["phase"] != "forward":
            continue
        index = counts.get(node["op"], 0)
        counts[node["op"]] = index + 1
        policy[(node["op"], index)] = any(actions.get(t) == "save" for t in node["outputs"])
    return policy


def sac_policy_from_export(doc):
    """{(op, call index): True} from `ckptplan export --to pytorch-sac` output."""
    if doc.get("format") != "ckptplan.export.pytorch-sac":
        raise ValueError("not a `ckptplan export --to pytorch-sac` file")
    return {(e["op"], e["call_index"]): True for e in doc["must_save"]}


def sac_context_fn(plan, graph, policy=None):
    """context_fn for torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False, context_fn=...) wrapping the whole model call."""
    checkpoint = torch.utils.checkpoint
    if not hasattr(checkpoint, "create_selective_checkpoint_contexts"):
        raise NotImplementedError(
            "selective checkpointing needs torch.utils.checkpoint.create_selective_checkpoint_contexts "
            "(PyTorch 2.4+); this is PyTorch %s: use ckptplan_torch.apply_plan" % torch.__version__)
    if policy is None:
        policy = sac_policy(plan, graph)
    Policy = checkpoint.CheckpointPolicy

    def context_fn():
        counts = {False: {}, True: {}}  # forward calls, recompute calls

        def policy_fn(ctx, op, *args, **kwargs):
            seen = counts[bool(ctx.is_recompute)]
            key = str(op)
            index = seen.get(key, 0)
            seen[key] = index + 1
            if policy.get((key, index)):
                return Policy.MUST_SAVE
            return Policy.PREFER_RECOMPUTE

        return checkpoint.create_selective_checkpoint_contexts(policy_fn)

    return context_fn
