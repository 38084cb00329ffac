#!/usr/bin/python3
"""Applies a ckptplan plan to a PyTorch model.

The plan must have been made on the graph scripts/export_torch.py wrote for
the same model and input shapes: its tensor names are the joint graph's fx
node names.

Routes:
  (a) joint graph (PyTorch 1.13+): `compile_with_plan(model, plan)` returns an
      AOTAutograd-compiled module whose partition function hands the backward
      exactly the forward values the plan saves (plus parameters and inputs,
      which are resident anyway); everything else the backward needs is
      recomputed in the backward from those.
  (b) selective checkpointing (PyTorch 2.4+): `sac_context_fn(plan, graph)`
      returns a context_fn for torch.utils.checkpoint.checkpoint whose
      policy_fn saves an op's output when the plan saves it, keyed by
      (aten op, call index among forward calls of that op); the same keys as
      `ckptplan export --to pytorch-sac` (see sac_policy_from_export).
  (c) module wrapping (PyTorch 1.13+): `wrap_recomputed_modules(model, plan,
      graph)` wraps in torch.utils.checkpoint every outermost module whose
      internal saved tensors the plan recomputes entirely.

CLI: `ckptplan_torch.py --model FILE.py:FUNCTION --plan plan.json
[--graph graph.json] [--route a|b|c]` runs one training step with the plan
applied and prints the bytes the forward kept for backward.
"""

import argparse
import functools
import inspect
import json
import os
import sys
import warnings

import torch
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

try:  # PyTorch 2.x
    from torch._functorch import partitioners as _partitioners
    from torch._functorch.aot_autograd import aot_module
except ImportError:  # PyTorch 1.13
    from functorch._src import partitioners as _partitioners
    from functorch.compile import aot_module


def load_json(path):
    with open(path) as f:
        return json.load(f)


def plan_actions(plan):
    """{tensor name: "save" | "recompute"} from a plan file (dict)."""
    if plan.get("format") != "ckptplan.plan":
        raise ValueError("not a ckptplan plan file (format must be ckptplan.plan)")
    return {d["tensor"]: d["action"] for d in plan["decisions"]}


# --------------------------------------------------------------------------
# Route (a): a partition function that follows the plan.


def plan_partition(actions):
    """AOTAutograd partition_fn: saves what `actions` saves, recomputes the rest."""

    def partition(joint_module, joint_inputs, **kwargs):
        by_name = {n.name: n for n in joint_module.graph.nodes}
        missing = [name for name, action in actions.items()
                   if action == "save" and name not in by_name]
        if missing:
            raise ValueError("plan saves tensors the joint graph lacks (was the plan made "
                             "on this model's export?): %s" % ", ".join(sorted(missing)[:5]))
        primals = [n for n in joint_module.graph.nodes
                   if n.op == "placeholder" and "tangent" not in str(n.target)]
        saved = [by_name[name] for name, action in sorted(actions.items())
                 if action == "save"]
        saved_values = primals + saved
        params = inspect.signature(_partitioners._extract_fwd_bwd_modules).parameters
        if "saved_sym_nodes" in params:
            return _partitioners._extract_fwd_bwd_modules(
                joint_module, saved_values, saved_sym_nodes=[],
                num_fwd_outputs=kwargs["num_fwd_outputs"])
        if "num_fwd_outputs" in params:
            return _partitioners._extract_fwd_bwd_modules(
                joint_module, saved_values, num_fwd_outputs=kwargs["num_fwd_outputs"])
        return _partitioners._extract_fwd_bwd_modules(joint_module, saved_values)

    return partition


def compile_with_plan(model, plan):
    """Route (a): model compiled by AOTAutograd with the plan's save set."""

    def compiler(gm, example_inputs):
        return gm

    return aot_module(model, fw_compiler=compiler, bw_compiler=compiler,
                      partition_fn=plan_partition(plan_actions(plan)))


# --------------------------------------------------------------------------
# Route (b): selective activation checkpointing policy (PyTorch 2.4+).


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
    """Route (b): context_fn for torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False, context_fn=...) wrapping the whole model call."""
    checkpoint = torch.utils.checkpoint
    if not hasattr(checkpoint, "create_selective_checkpoint_contexts"):
        raise NotImplementedError(
            "route (b) needs torch.utils.checkpoint.create_selective_checkpoint_contexts "
            "(PyTorch 2.4+); this is PyTorch %s: use route (a) or (c)" % torch.__version__)
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


# --------------------------------------------------------------------------
# Route (c): whole modules under torch.utils.checkpoint.


def recomputed_scopes(plan, graph):
    """Outermost module scopes whose internal saved tensors the plan drops.

    A scope's internal tensors are the candidates its forward nodes make,
    less its outputs (tensors read by forward nodes outside the scope), which
    checkpointing keeps as the next module's input.
    """
    actions = plan_actions(plan)
    producer_scope, readers = {}, {}
    for node in graph["nodes"]:
        if node["phase"] != "forward":
            continue
        for t in node["outputs"]:
            producer_scope[t] = node.get("scope", "")
        for t in node["inputs"]:
            readers.setdefault(t, []).append(node.get("scope", ""))

    def inside(scope, root):
        return scope == root or scope.startswith(root + "/")

    scopes = set()
    for scope in producer_scope.values():
        parts = scope.split("/") if scope else []
        for i in range(1, len(parts) + 1):
            scopes.add("/".join(parts[:i]))
    chosen = []
    for scope in sorted(scopes, key=lambda s: (s.count("/"), s)):
        if any(inside(scope, c) for c in chosen):
            continue
        internal = [t for t, s in producer_scope.items()
                    if t in actions and inside(s, scope)
                    and all(inside(r, scope) for r in readers.get(t, []))]
        if internal and all(actions[t] == "recompute" for t in internal):
            chosen.append(scope)
    return chosen


def module_for_scope(model, scope):
    return model.get_submodule(scope.replace("/", "."))


def wrap_recomputed_modules(model, plan, graph):
    """Route (c): wraps each recomputed scope's forward in checkpoint; returns
    the scopes wrapped."""
    scopes = recomputed_scopes(plan, graph)
    for scope in scopes:
        module = module_for_scope(model, scope)
        forward = module.forward

        def checkpointed(*args, _forward=forward, **kwargs):
            return torch.utils.checkpoint.checkpoint(_forward, *args, use_reentrant=False,
                                                     **kwargs)

        module.forward = checkpointed
    return scopes


# --------------------------------------------------------------------------
# Measuring what the forward keeps for backward.


def saved_bytes(run, exclude=()):
    """Runs `run()` (a forward) and returns (bytes, loss): the unique storages
    autograd saved for backward, less those in `exclude` (parameters, inputs)."""
    excluded = {export_torch.storage_key(t) for t in exclude}
    seen = {}

    def pack(t):
        if t.numel() > 0:
            key = export_torch.storage_key(t)
            if key not in excluded:
                seen[key] = export_torch.storage_bytes(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    return sum(seen.values()), loss


def predicted_saved_bytes(plan, graph):
    """Bytes of the unique storages the plan saves, from the graph."""
    tensors = {t["id"]: t for t in graph["tensors"]}

    def root(name):
        while "alias_of" in tensors[name]:
            name = tensors[name]["alias_of"]
        return name

    def nbytes(entry):
        if "bytes" in entry:
            return entry["bytes"]
        n = 1
        for d in entry["shape"]:
            n *= d
        sizes = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8,
                 "int32": 4, "bool": 1, "uint8": 1, "int8": 1, "int16": 2}
        return n * sizes[entry["dtype"]]

    roots = {root(name) for name, action in plan_actions(plan).items() if action == "save"}
    resident = {"parameter", "buffer", "input", "optimizer_state"}
    return sum(nbytes(tensors[r]) for r in roots if tensors[r]["kind"] not in resident)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True,
                        help="FILE.py:FUNCTION returning (model, example_inputs)")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--graph", help="graph the plan was made on (routes b, c)")
    parser.add_argument("--route", default="a", choices=["a", "b", "c"])
    parser.add_argument("--sac", help="route b: a `ckptplan export --to pytorch-sac` file "
                        "instead of the plan's save set")
    args = parser.parse_args(argv)
    model, inputs = export_torch.load_factory(args.model)()
    plan = load_json(args.plan)
    graph = load_json(args.graph) if args.graph else None
    if args.route in ("b", "c") and graph is None:
        raise SystemExit("ckptplan_torch: route %s needs --graph" % args.route)
    resident = list(model.parameters()) + list(model.buffers()) + list(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.route == "a":
            compiled = compile_with_plan(model, plan)
            compiled(*inputs)  # traces outside the hooks; the measured call reuses it
            kept, loss = saved_bytes(lambda: compiled(*inputs), resident)
        elif args.route == "b":
            try:
                policy = sac_policy_from_export(load_json(args.sac)) if args.sac else None
                context_fn = sac_context_fn(plan, graph, policy)
            except NotImplementedError as e:
                raise SystemExit("ckptplan_torch: %s" % e)
            kept, loss = saved_bytes(lambda: torch.utils.checkpoint.checkpoint(
                model, *inputs, use_reentrant=False, context_fn=context_fn), resident)
        else:
            print("wrapped: %s" % ", ".join(wrap_recomputed_modules(model, plan, graph)))
            kept, loss = saved_bytes(lambda: model(*inputs), resident)
        loss.backward()
    print("loss %.6f, forward kept %d bytes for backward" % (loss.item(), kept))
    if graph is not None:
        print("plan predicted %d bytes" % predicted_saved_bytes(plan, graph))


if __name__ == "__main__":
    main()
