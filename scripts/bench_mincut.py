#!/usr/bin/python3
"""Planning time: ckptplan against PyTorch's min-cut partitioner on GPT-2 small.

Traces one training step of a GPT-2-small-shaped model (12 layers, hidden 768,
12 heads, vocab 50257, tied embeddings; batch 8, seq 512, and batch 2, seq 128)
into an AOTAutograd-style joint forward+backward FX graph under fake tensors
(no activation is materialised), then times, in the same run:

- functorch's `min_cut_rematerialization_partition` on that joint graph;
- `ckptplan plan` on the same graph converted to ckptplan.graph JSON, at 50%
  and 80% of its save-all peak (`ckptplan simulate --json`, peak_bytes).

Each figure is the median of --runs runs, in CPU time (user+sys): this
process's around the partitioner's call (its graph already in memory); for
ckptplan both the whole child process's (os.wait4: start, parse, plan,
simulations for the summary, writing the plan) and PlanGraph's alone
(`--timings`' plan_cpu_s, its graph already in memory), with the ratio of the
partitioner's time to each.

Usage: /usr/bin/python3 scripts/bench_mincut.py [--binary build/ckptplan]
       [--runs 3] [--workdir DIR] [--sizes 8x512,2x128]
       /usr/bin/python3 scripts/bench_mincut.py --write-traced OUT.json LAYERS
         (writes the traced graph of a LAYERS-block model, batch 8, seq 512)
"""

import argparse
import json
import operator
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.fx as fx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ckptplan_torch.export import (FORMAT, VERSION, dtype_name, flat_nodes,  # noqa: E402
                                   node_flops, write_json)

from functorch import make_fx  # noqa: E402
from functorch.compile import min_cut_rematerialization_partition  # noqa: E402
from functorch._src.aot_autograd import create_joint_forward_backward  # noqa: E402
from functorch._src.partitioners import (_extract_fwd_bwd_outputs,  # noqa: E402
                                         _extract_graph_with_inputs_outputs, _is_primal)


# --------------------------------------------------------------------------
# GPT-2 small.


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids, targets):
        s = ids.shape[1]
        pos = torch.arange(s, device=ids.device)
        mask = torch.ones(s, s, dtype=torch.bool, device=ids.device).triu(1)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x, mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def trace_joint(batch, seq, layers=12):
    """(joint GraphModule, joint inputs, num_fwd_outputs, parameter count) of one
    step of a GPT-2-small-shaped model of `layers` blocks, traced as AOTAutograd
    does, with make_fx under fake tensors."""
    torch.manual_seed(0)
    model = GPT2(layers=layers)
    params = list(model.parameters())  # wte once: tied weights are one primal
    ids = torch.randint(0, 50257, (batch, seq))
    targets = torch.randint(0, 50257, (batch, seq))
    names = [n for n, _ in model.named_parameters()]

    def step(*args):
        values = dict(zip(names, args[:len(params)]))
        loss = torch.func.functional_call(model, values, args[len(params):]) \
            if hasattr(torch, "func") else _functional_call(model, values, args[len(params):])
        return [loss]

    joint_fn = create_joint_forward_backward(step)
    primals = [p.detach().requires_grad_(True) for p in params] + [ids, targets]
    tangents = [torch.ones(())]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint = make_fx(joint_fn, tracing_mode="fake")(primals, tangents)
    return joint, (primals, tangents), 1, sum(p.numel() for p in params)


def _functional_call(model, values, args):
    from torch.nn.utils.stateless import functional_call
    return functional_call(model, values, tuple(args))


# --------------------------------------------------------------------------
# Joint FX graph -> ckptplan.graph (shapes from meta['val'], no values).

_VIEWS = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze",
          "squeeze", "slice", "select", "alias", "as_strided", "split", "split_with_sizes",
          "unbind", "_reshape_alias"}


def joint_to_graph(joint, num_fwd, parameter_count):
    nodes = list(joint.graph.nodes)
    fwd_outputs, _ = _extract_fwd_bwd_outputs(joint)
    primals = [n for n in nodes if _is_primal(n)]
    # The partitioner's forward: what the forward outputs need from the primals.
    fwd_graph = _extract_graph_with_inputs_outputs(joint.graph, primals, fwd_outputs)
    forward = {n.name for n in fwd_graph.nodes if n.op != "output"}
    tensors, out_nodes, ids = [], [], {}

    def add(tid, val, kind="activation", alias_of=None):
        entry = {"id": tid}
        if alias_of is None:
            entry["shape"] = [int(d) for d in val.shape]
            entry["dtype"] = dtype_name(val.dtype)
        else:
            entry["bytes"] = 0
            entry["alias_of"] = alias_of
        entry["kind"] = kind
        tensors.append(entry)
        return tid

    param_count = 0
    for n in nodes:
        if n.op == "placeholder":
            val = n.meta["val"]
            if _is_primal(n) and val.is_floating_point():
                kind = "parameter"
                param_count += 1
            else:
                kind = "input"
            ids[n] = add(n.name, val, kind)
    for n in nodes:
        if n.op != "call_function":
            continue
        args = flat_nodes((n.args, n.kwargs))
        if n.target is operator.getitem:
            parent = ids.get(n.args[0])
            if isinstance(parent, dict):
                ids[n] = parent.get(n.args[1])
            continue
        in_ids = []
        for a in args:
            tid = ids.get(a)
            if isinstance(tid, str) and tid not in in_ids:
                in_ids.append(tid)
        op = str(n.target)
        name = op.split(".")[1] if op.startswith("aten.") else op
        if name == "detach" and len(in_ids) == 1:
            ids[n] = in_ids[0]
            continue
        val = n.meta.get("val")
        if val is None and n.users and all(u.target is operator.getitem for u in n.users):
            # make_fx records no value for a tuple result: rebuild it from its getitems.
            parts = {u.args[1]: u.meta.get("val") for u in n.users}
            val = [parts.get(i) for i in range(max(parts) + 1)]
        elif val is None:
            raise RuntimeError("node %s (%s) has no meta['val']" % (n.name, n.target))
        alias = in_ids[0] if name in _VIEWS and in_ids else None
        outs, out_vals = [], []
        if isinstance(val, torch.Tensor):
            outs.append(add(n.name, val, alias_of=alias))
            out_vals.append(val)
            ids[n] = n.name
        elif isinstance(val, (tuple, list)):
            users = {u.args[1]: u for u in n.users if u.target is operator.getitem}
            elements = {}
            for i, v in enumerate(val):
                if isinstance(v, torch.Tensor):
                    tid = users[i].name if i in users else "%s.%d" % (n.name, i)
                    elements[i] = add(tid, v, alias_of=alias)
                    outs.append(tid)
                    out_vals.append(v)
            ids[n] = elements
        if not outs:
            continue
        in_vals = [a.meta.get("val") for a in args]
        out_nodes.append({
            "id": n.name, "op": op,
            "phase": "forward" if n.name in forward else "backward",
            "inputs": in_ids, "outputs": outs,
            "flops": node_flops(op, in_vals, out_vals),
        })
    # Gradients: the joint graph's outputs after the forward ones.
    out = [n for n in nodes if n.op == "output"][0]
    grads = flat_nodes(out.args)[num_fwd:]
    by_id = {t["id"]: t for t in tensors}
    for g in grads:
        tid = ids.get(g)
        while isinstance(tid, str) and "alias_of" in by_id[tid]:
            tid = by_id[tid]["alias_of"]
        if isinstance(tid, str) and by_id[tid]["kind"] == "activation":
            by_id[tid]["kind"] = "gradient"
    return {
        "format": FORMAT, "version": VERSION,
        "producer": "scripts/bench_mincut.py (torch %s, fake tensors)" % torch.__version__,
        "tensors": tensors, "nodes": out_nodes,
        "training": {"optimizer": "none", "parameter_count": parameter_count},
    }


# --------------------------------------------------------------------------
# Timing.


def cpu_seconds(fn):
    t = os.times()
    fn()
    u = os.times()
    return (u.user - t.user) + (u.system - t.system)


def child_cpu_seconds(cmd, ok=(0,)):
    """Runs cmd; returns (user+sys CPU seconds of the child, its stdout, exit code, its stderr)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode()
        proc.stderr.close()
        out.seek(0)
        text = out.read().decode()
    if proc.returncode not in ok:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), proc.returncode, err))
    return usage.ru_utime + usage.ru_stime, text, proc.returncode, err


def plan_cpu(stderr):
    """PlanGraph's CPU seconds from the `--timings` line."""
    match = re.search(r"^timings:.* plan_cpu_s=([0-9.e+-]+)", stderr, re.M)
    if match is None:
        raise RuntimeError("no timings line from ckptplan: %s" % stderr)
    return float(match.group(1))


def median_of(runs, fn):
    return statistics.median(fn() for _ in range(runs))


def bench(size, args):
    batch, seq = size
    t0 = time.time()
    joint, joint_inputs, num_fwd, pcount = trace_joint(batch, seq)
    calls = [n for n in joint.graph.nodes if n.op == "call_function"]
    sys.stderr.write("batch %d seq %d: traced %d FX nodes in %.1f s\n"
                     % (batch, seq, len(calls), time.time() - t0))

    def mincut():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # torch 1.13's signature has no num_fwd_outputs: it reads the
            # forward outputs from the joint graph's output (fwd, bwd) pair.
            min_cut_rematerialization_partition(joint, joint_inputs)

    mincut_s = median_of(args.runs, lambda: cpu_seconds(mincut))

    graph = joint_to_graph(joint, num_fwd, pcount)
    path = os.path.join(args.workdir, "gpt2_b%d_s%d.json" % (batch, seq))
    write_json(graph, path)
    _, text, _, _ = child_cpu_seconds([args.binary, "simulate", path, "--json"])
    peak = json.loads(text)["peak_bytes"]
    row = {"batch": batch, "seq": seq, "fx_nodes": len(calls), "nodes": len(graph["nodes"]),
           "save_all": peak, "mincut_s": mincut_s}
    for frac in (0.5, 0.8):
        budget = int(peak * frac)
        cmd = [args.binary, "plan", path, "--budget", str(budget), "--timings",
               "-o", os.path.join(args.workdir, "plan_%d.json" % int(frac * 100))]
        # Exit 3: the lower bound (parameters + gradients + largest step) is
        # above the budget; the time is then that of proving it, marked "*".
        results = [child_cpu_seconds(cmd, ok=(0, 3)) for _ in range(args.runs)]
        row["process_%d" % int(frac * 100)] = statistics.median(r[0] for r in results)
        row["plan_%d" % int(frac * 100)] = statistics.median(plan_cpu(r[3]) for r in results)
        row["infeasible_%d" % int(frac * 100)] = any(r[2] == 3 for r in results)
    return row


def write_traced(path, layers, batch=8, seq=512):
    """Traces a `layers`-block GPT-2-small-shaped model's step and writes it as
    ckptplan.graph JSON (scripts/bench_scale.py's "fx" family: a real export,
    one microbatch, one region)."""
    joint, _, num_fwd, pcount = trace_joint(batch, seq, layers)
    # What the partitioner does to the joint graph before bench() converts it:
    # checks without users (aten.is_same_size) go.
    joint.graph.eliminate_dead_code()
    write_json(joint_to_graph(joint, num_fwd, pcount), path)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--write-traced":
        write_traced(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default="build/ckptplan")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir")
    parser.add_argument("--sizes", default="8x512,2x128", help="BATCHxSEQ,...")
    args = parser.parse_args()
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="bench_mincut.")
    os.makedirs(args.workdir, exist_ok=True)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    rows = [bench(s, args) for s in sizes]
    print("GPT-2 small, one step; CPU seconds, median of %d; ckptplan at 50%% / 80%% of "
          "save-all: the process, and PlanGraph alone (plan_cpu_s); ratio = min-cut s / "
          "ckptplan's" % args.runs)
    print("%-12s %6s %9s %9s | %9s %9s %8s %8s | %9s %9s %8s %8s" % (
        "batch x seq", "nodes", "save-all", "min-cut s", "50% proc", "50% plan", "ratio",
        "ratio", "80% proc", "80% plan", "ratio", "ratio"))
    print("%-12s %6s %9s %9s | %9s %9s %8s %8s | %9s %9s %8s %8s" % (
        "", "", "", "", "", "", "proc", "plan", "", "", "proc", "plan"))
    for r in rows:
        cells = []
        for f in (50, 80):
            mark = "*" if r["infeasible_%d" % f] else " "
            cells.append("%8.4f%s %8.4f%s %7.0fx %7.0fx" % (
                r["process_%d" % f], mark, r["plan_%d" % f], mark,
                r["mincut_s"] / max(r["process_%d" % f], 1e-9),
                r["mincut_s"] / max(r["plan_%d" % f], 1e-9)))
        print("%-12s %6d %7.2f G %9.3f | %s | %s" % (
            "%d x %d" % (r["batch"], r["seq"]), r["nodes"], r["save_all"] / 2**30,
            r["mincut_s"], cells[0], cells[1]))
    if any(r["infeasible_50"] or r["infeasible_80"] for r in rows):
        print("* infeasible: the budget is under parameters + gradients + the largest step "
              "(exit 3); the time is ckptplan's to say so")


if __name__ == "__main__":
    main()
