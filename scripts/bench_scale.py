#!/usr/bin/python3
"""Scaling benchmark: parse, simulate and plan time and peak RSS by graph size.

Generates GPT-2-small-shaped transformer graphs (`ckptplan generate
transformer`, 12 layers, more microbatches for bigger graphs) of about 10^3,
10^4, 10^5 and 10^6 nodes, then runs `ckptplan plan --timings` at a budget of
50% of the save-all peak (or --fraction). When the planner cannot reach that
budget, it reruns at the lowest peak the planner reached and says so. Prints
medians over --runs runs (--big-runs for graphs of 10^6 nodes, --small-runs
for graphs under 5,000 nodes, whose plans take milliseconds and whose medians
need more runs on a noisy machine).

Usage: /usr/bin/python3 scripts/bench_scale.py [--binary build/ckptplan]
       [--sizes 1e3,1e4,1e5,1e6] [--runs 3] [--big-runs 1] [--small-runs 21]
       [--fraction 0.5]
       [--plan-timeout 600] [--workdir DIR] [--strategy ckptplan|greedy]

With --deep, one-region graphs instead (one microbatch, so the planner
cannot split the step): `generate transformer --layers L`, random layered
DAGs (`generate random --layers N --width 10 --max-inputs 3 --min-bytes 1000
--max-bytes 100000`), a deep residual MLP stack that this script writes
as JSON itself, not with ckptplan's generator, and a real export: a
GPT-2-small-shaped model of more layers traced by PyTorch (make_fx under fake
tensors, batch 8, seq 512: bench_mincut.py --write-traced) (--families), of about
--deep-sizes nodes, each with both strategies (or only --strategy, when given)
at each of --fractions of the save-all peak. It prints the plan's CPU time (median of --runs), peak RSS,
drops, recompute overhead (recompute cost / the step's cost) and, per graph
family and strategy, the growth exponent fitted (least squares on logs) to
the plan times from 10^4 nodes up. A plan that runs past --plan-timeout is
shown as such and the sizes above it are skipped.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

# Graph shapes per size: 12 layers is ~1,742 nodes per microbatch.
SHAPES = {
    "1e3": ["--layers", "7"],
    "gpt2": ["--layers", "12"],
    "1e4": ["--layers", "12", "--microbatches", "6"],
    "1e5": ["--layers", "12", "--microbatches", "57"],
    "1e6": ["--layers", "12", "--microbatches", "574"],
}


def timings(binary, graph, budget, timeout, strategy):
    """Runs one plan; returns the parsed timings line, or None on timeout."""
    command = [binary, "plan", graph, "--budget", str(budget), "--timings", "--strategy", strategy]
    try:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    line = next((l for l in done.stderr.splitlines() if l.startswith("timings:")), None)
    if line is None:
        sys.exit("bench: no timings from %s (exit %d): %s" % (command, done.returncode,
                                                              done.stderr))
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.e+-]+)", line)}


# One-region shapes: nodes per transformer layer and per random layer.
TRANSFORMER_NODES_PER_LAYER = 144.2
RANDOM_WIDTH = 10
RANDOM_NODES_PER_LAYER = 19.75


STACK_NODES_PER_BLOCK = 10
# The traced GPT (bench_mincut.py --write-traced): 125 nodes a block, 32 more.
# make_fx holds the whole traced model: 240 layers trace on this 23 GiB
# machine, 800 layers (10^5 nodes) took all of its memory and swapped.
FX_NODES_PER_LAYER = 125
FX_NODES_FIXED = 32
FX_MAX_LAYERS = 240


def write_stack(path, blocks, batch=2048, hidden=256, ffn=1024):
    """Writes a deep residual MLP stack the way a hand export from another
    framework would: x <- x + W2 gelu(W1 layernorm(x)), blocks times, then an
    MSE loss, its backward pass written out node by node and one AdamW step.
    Not made by ckptplan's generator: its node names, ops and layout are this
    script's own."""
    tensors, nodes = [], []

    def tensor(name, shape, kind):
        tensors.append({"id": name, "shape": shape, "dtype": "float32", "kind": kind})
        return name

    def node(name, op, phase, inputs, outputs, flops):
        nodes.append({"id": name, "op": op, "phase": phase, "inputs": inputs,
                      "outputs": outputs, "flops": float(flops)})

    act, wide = [batch, hidden], [batch, ffn]
    x = [tensor("x0", act, "input")]
    params, grads = [], []
    for i in range(blocks):
        g = tensor("b%d.norm.g" % i, [hidden], "parameter")
        w1 = tensor("b%d.fc1.w" % i, [hidden, ffn], "parameter")
        w2 = tensor("b%d.fc2.w" % i, [ffn, hidden], "parameter")
        params += [g, w1, w2]
        n = tensor("b%d.norm.out" % i, act, "activation")
        h = tensor("b%d.fc1.out" % i, wide, "activation")
        a = tensor("b%d.gelu.out" % i, wide, "activation")
        y = tensor("b%d.fc2.out" % i, act, "activation")
        out = tensor("b%d.out" % i, act, "activation")
        node("b%d.norm" % i, "layer_norm", "forward", [x[-1], g], [n], 8 * batch * hidden)
        node("b%d.fc1" % i, "matmul", "forward", [n, w1], [h], 2 * batch * hidden * ffn)
        node("b%d.gelu" % i, "gelu", "forward", [h], [a], 8 * batch * ffn)
        node("b%d.fc2" % i, "matmul", "forward", [a, w2], [y], 2 * batch * hidden * ffn)
        node("b%d.add" % i, "add", "forward", [x[-1], y], [out], batch * hidden)
        x.append(out)
    loss = tensor("loss", [], "activation")
    node("loss", "mse_loss", "forward", [x[-1]], [loss], 2 * batch * hidden)
    dx = tensor("loss.grad", act, "activation")
    node("loss.bwd", "mse_loss_bwd", "backward", [x[-1]], [dx], 2 * batch * hidden)
    for i in reversed(range(blocks)):
        da = tensor("b%d.gelu.out.grad" % i, wide, "activation")
        dh = tensor("b%d.fc1.out.grad" % i, wide, "activation")
        dn = tensor("b%d.norm.out.grad" % i, act, "activation")
        dxn = tensor("b%d.in.grad.norm" % i, act, "activation")
        dxi = tensor("b%d.in.grad" % i, act, "activation")
        dw1 = tensor("b%d.fc1.w.grad" % i, [hidden, ffn], "gradient")
        dw2 = tensor("b%d.fc2.w.grad" % i, [ffn, hidden], "gradient")
        dg = tensor("b%d.norm.g.grad" % i, [hidden], "gradient")
        grads += [dg, dw1, dw2]
        node("b%d.fc2.bwd" % i, "matmul_bwd", "backward",
             [dx, "b%d.gelu.out" % i, "b%d.fc2.w" % i], [da, dw2], 4 * batch * hidden * ffn)
        node("b%d.gelu.bwd" % i, "gelu_bwd", "backward", [da, "b%d.fc1.out" % i], [dh],
             10 * batch * ffn)
        node("b%d.fc1.bwd" % i, "matmul_bwd", "backward",
             [dh, "b%d.norm.out" % i, "b%d.fc1.w" % i], [dn, dw1], 4 * batch * hidden * ffn)
        node("b%d.norm.bwd" % i, "layer_norm_bwd", "backward",
             [dn, x[i], "b%d.norm.g" % i], [dxn, dg], 12 * batch * hidden)
        node("b%d.add.bwd" % i, "add", "backward", [dx, dxn], [dxi], batch * hidden)
        dx = dxi
    node("adamw", "adamw", "optimizer", params + grads, [], 0)
    import json
    with open(path + ".tmp", "w") as f:
        json.dump({"format": "ckptplan.graph", "version": 1,
                   "description": "deep residual MLP stack, %d blocks (bench_scale.py)" % blocks,
                   "training": {"optimizer": "adamw"}, "tensors": tensors, "nodes": nodes}, f)
    os.replace(path + ".tmp", path)


def deep_graph(binary, workdir, family, size, fx_max_layers=FX_MAX_LAYERS):
    """Generates (once) a one-region graph of about `size` nodes."""
    if family == "stack":
        blocks = max(1, round(size / STACK_NODES_PER_BLOCK))
        graph = os.path.join(workdir, "deep2_stack_%d.json" % blocks)
        if not os.path.exists(graph):
            # In a child process: a plan forked from this one would count the
            # lists built here in its peak RSS.
            subprocess.run([sys.executable, os.path.abspath(__file__), "--write-stack", graph,
                            str(blocks)], check=True)
        return graph, "stack --blocks %d" % blocks
    if family == "fx":
        layers = max(1, round((size - FX_NODES_FIXED) / FX_NODES_PER_LAYER))
        if layers > fx_max_layers:
            return None, "traced GPT, %d layers (not traced: over --fx-max-layers)" % layers
        graph = os.path.join(workdir, "deep2_fx_%d.json" % layers)
        if not os.path.exists(graph):
            tracer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_mincut.py")
            subprocess.run([sys.executable, tracer, "--write-traced", graph, str(layers)],
                           check=True)
        return graph, "traced GPT, %d layers" % layers
    if family == "transformer":
        layers = max(1, round(size / TRANSFORMER_NODES_PER_LAYER))
        args = ["transformer", "--layers", str(layers)]
    else:
        layers = max(2, round(size / RANDOM_NODES_PER_LAYER))
        # Activations of 1 kB to 100 kB, so that they, not the parameters
        # and optimizer state, set the peak.
        args = ["random", "--layers", str(layers), "--width", str(RANDOM_WIDTH),
                "--max-inputs", "3", "--min-bytes", "1000", "--max-bytes", "100000"]
    graph = os.path.join(workdir, "deep2_%s_%d.json" % (family, layers))
    if not os.path.exists(graph):
        subprocess.run([binary, "generate"] + args + ["-o", graph], check=True,
                       stdout=subprocess.DEVNULL)
    return graph, "%s --layers %d" % (family, layers)


def fit_exponent(points):
    """Least-squares slope of log(time) on log(nodes)."""
    import math
    points = [(math.log(n), math.log(t)) for n, t in points if t and t > 0]
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def deep(args, workdir):
    fractions = [float(f) for f in args.fractions.split(",")]
    sizes = [int(float(s)) for s in args.deep_sizes.split(",")]
    print("| graph | nodes | strategy | budget | plan CPU s | plan wall s | peak RSS | RSS/node "
          "| drops | recompute overhead | fits | runs |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    fits = {}
    for family in args.families.split(","):
        for strategy in (args.strategy,) if args.strategy else ("ckptplan", "greedy"):
            for fraction in fractions:
                timed_out = False
                for size in sizes:
                    if timed_out:
                        break
                    graph, label = deep_graph(args.binary, workdir, family, size,
                                              args.fx_max_layers)
                    if graph is None:
                        print("| %s | | %s | %g%% | (skipped) | | | | | | | 0/0 |"
                              % (label, strategy, 100 * fraction))
                        break
                    probe = timings(args.binary, graph, 2**62, None, "save-all")
                    budget = int(probe["save_all_peak"] * fraction)
                    samples = []
                    runs = args.big_runs if probe["nodes"] >= 500000 else args.runs
                    for _ in range(runs):
                        sample = timings(args.binary, graph, budget, args.plan_timeout, strategy)
                        if sample is None:
                            timed_out = True
                            break
                        samples.append(sample)
                    nodes = int(probe["nodes"])
                    if not samples:
                        print("| %s | %d | %s | %g%% | > %g (timeout) | | | | | | | 0/%d |"
                              % (label, nodes, strategy, 100 * fraction, args.plan_timeout, runs))
                        continue
                    med = lambda key: statistics.median(s[key] for s in samples)
                    rss = max(s["rss_kib"] for s in samples) * 1024
                    overhead = med("recompute_cost") / max(med("step_cost"), 1e-300)
                    fits.setdefault((family, strategy, fraction), []).append(
                        (nodes, med("plan_cpu_s")))
                    print("| %s | %d | %s | %g%% | %.3f | %.3f | %.1f MiB | %.0f B | %d | %.2f%% "
                          "| %s | %d/%d |"
                          % (label, nodes, strategy, 100 * fraction, med("plan_cpu_s"),
                             med("plan_s"), rss / 2**20, rss / nodes, int(med("drops")),
                             100 * overhead, "yes" if all(s["fits"] for s in samples) else "no",
                             len(samples), runs))
                    sys.stdout.flush()
    print("\n| graph | strategy | budget | growth exponent (plan CPU, 10^4 nodes and up) |")
    print("|---|---|---:|---:|")
    for (family, strategy, fraction), points in fits.items():
        exponent = fit_exponent([p for p in points if p[0] >= 9000])
        print("| %s | %s | %g%% | %s |" % (family, strategy, 100 * fraction,
                                            "-" if exponent is None else "%.2f" % exponent))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--write-stack":
        write_stack(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/ckptplan")
    parser.add_argument("--sizes", default="1e3,gpt2,1e4,1e5,1e6")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-runs", type=int, default=1)
    parser.add_argument("--small-runs", type=int, default=21)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--plan-timeout", type=float, default=600)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--strategy", default=None,
                        help="plan --strategy: ckptplan (the default search) or greedy; "
                        "default ckptplan, and with --deep both")
    parser.add_argument("--deep", action="store_true",
                        help="one-region graphs, both strategies (see above)")
    parser.add_argument("--deep-sizes", default="1e3,1e4,3e4,1e5,1e6")
    parser.add_argument("--families", default="transformer,random,stack,fx",
                        help="transformer (generate transformer), random (generate random), "
                        "stack (a residual MLP stack this script writes itself), fx (a "
                        "GPT-2-small-shaped model of more layers traced by PyTorch's make_fx, "
                        "as bench_mincut.py does)")
    parser.add_argument("--fractions", default="0.5,0.8")
    parser.add_argument("--fx-max-layers", type=int, default=FX_MAX_LAYERS,
                        help="the fx family's largest model traced (memory: see FX_MAX_LAYERS)")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="ckptplan_bench_")
    os.makedirs(workdir, exist_ok=True)
    if args.deep:
        deep(args, workdir)
        return
    args.strategy = args.strategy or "ckptplan"

    rows = []
    for size in args.sizes.split(","):
        graph = os.path.join(workdir, "transformer_%s.json" % size)
        if not os.path.exists(graph):
            subprocess.run([args.binary, "generate", "transformer"] + SHAPES[size] +
                           ["-o", graph], check=True, stdout=subprocess.DEVNULL)
        probe = timings(args.binary, graph, 2**62, None, args.strategy)
        budget = int(probe["save_all_peak"] * args.fraction)
        note = "%g%% of save-all" % (100 * args.fraction)
        runs = (args.big_runs if probe["nodes"] >= 500000 else
                args.small_runs if probe["nodes"] < 5000 else args.runs)
        samples = []
        for _ in range(runs):
            sample = timings(args.binary, graph, budget, args.plan_timeout, args.strategy)
            if sample is not None and not sample["fits"]:
                # The greedy stops above the budget: use the lowest peak it reached.
                budget = int(sample["peak"])
                note = "lowest reached (%g%% infeasible)" % (100 * args.fraction)
                sample = timings(args.binary, graph, budget, args.plan_timeout, args.strategy)
            samples.append(sample)
        done = [s for s in samples if s is not None]
        med = lambda key: statistics.median(s[key] for s in done) if done else float("nan")
        parse = statistics.median([probe["parse_s"]] + [s["parse_s"] for s in done])
        rss = max([probe["rss_kib"]] + [s["rss_kib"] for s in done]) * 1024
        plan = med("plan_s") if done else None
        rows.append((size, int(probe["nodes"]), parse, med("simulate_s") if done else
                     probe["simulate_s"], plan, int(med("drops")) if done else None,
                     budget / probe["save_all_peak"], note, rss, len(done), runs))

    print("| graph | nodes | parse s | simulate | plan s | drops | budget | peak RSS | "
          "RSS/node | plan/parse | runs |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for (size, nodes, parse, simulate, plan, drops, frac, note, rss, done, runs) in rows:
        plan_text = "%.4f" % plan if plan is not None else "> %g (timeout)" % args.plan_timeout
        ratio = "%.2f" % (plan / parse) if plan is not None else "-"
        print("| %s | %d | %.3f | %.2f ms | %s | %s | %.0f%% (%s) | %.1f MiB | %.0f B | %s | %d/%d |"
              % (size, nodes, parse, 1000 * simulate, plan_text, "-" if drops is None else drops,
                 100 * frac, note, rss / 2**20, rss / nodes, ratio, done, runs))
    plans = {size: plan for (size, _, _, _, plan, *_rest) in rows}
    if plans.get("1e5") and plans.get("1e6"):
        print("\nplan time 1e6 / 1e5: %.1f" % (plans["1e6"] / plans["1e5"]))


if __name__ == "__main__":
    main()
