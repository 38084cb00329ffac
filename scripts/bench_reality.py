#!/usr/bin/python3
"""Reality benchmark: plans applied to real models, measured at the allocator.

For each model of ckptplan_torch.zoo (torchvision resnet18,
mobilenet_v3_small and VisionTransformer; nn.TransformerEncoder with dropout;
nn.LSTM; nn.GRU), exports one Adam training step, plans it at save-all, 95%
and 85% of the save-all peak and at the lowest peak `ckptplan sweep`
reaches, applies each plan with ckptplan_torch.apply_plan and measures one
step (ckptplan_torch.measure.measure_plan): predicted and measured peak, the
error, whether loss, gradients, parameters and buffers are bit-equal to the
unplanned eager step, the plan's predicted recompute overhead and the
measured step-time ratio (median of --steps alternating steps).

With --host-link RATE (and --compute-rate FLOP/S), plans may offload
(docs/offload.md): each model is planned at 75%, 50% and 25% of the way from
the lowest recompute-only peak to save-all, with the link and without it;
the plan with the link is applied (its offloaded tensors' bytes leave the
allocator between their copy out and copy back) and measured, and the table
compares its predicted cost (recompute plus exposed copy time) with the
recompute-only plan's.

Usage: /usr/bin/python3 scripts/bench_reality.py [--ckptplan build/ckptplan]
       [--models resnet18,lstm] [--steps 5] [--json out.json]
       [--host-link 25GB/s --compute-rate 1e12]
Prints a Markdown table (docs/applied-plans.md and docs/offload.md show the
current ones). Exits 1 when any measured peak is more than 1% over its
prediction or any step is not bit-equal.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # this checkout's package first

import torch  # noqa: E402

import ckptplan_torch  # noqa: E402
from ckptplan_torch import measure, zoo  # noqa: E402


def run_json(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def plan_at(binary, graph_path, budget, path, extra=()):
    out = subprocess.run([binary, "plan", graph_path, "--budget", str(budget), "-o", path,
                          *extra], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    with open(path) as f:
        return json.load(f)


def budgets(save_all, lowest, offload):
    if offload:
        return [("%d%%" % f, lowest + (save_all - lowest) * f // 100) for f in (75, 50, 25)]
    return [("save-all", save_all), ("95%", save_all * 95 // 100),
            ("85%", save_all * 85 // 100), ("lowest", lowest)]


def plan_cost(plan):
    return plan["recompute_cost"] + plan.get("offload", {}).get("exposed_cost", 0.0)


def bench_model(binary, name, tmp, steps, offload=()):
    torch.manual_seed(0)
    model, inputs = zoo.MODELS[name]()
    graph_path = os.path.join(tmp, name + ".json")
    start = time.perf_counter()
    ckptplan_torch.write_json(ckptplan_torch.export_graph(model, inputs), graph_path)
    export_s = time.perf_counter() - start
    sweep = run_json(binary, "sweep", graph_path, "--budgets", "1", "--json")
    save_all = sweep["save_all_peak_bytes"]
    lowest = sweep["lowest_peak_bytes"]
    rows = []
    for label, budget in budgets(save_all, lowest, bool(offload)):
        plan = plan_at(binary, graph_path, budget, os.path.join(tmp, "%s.plan.json" % name),
                       offload)
        row = {"model": name, "budget": label, "budget_bytes": budget,
               "save_all_bytes": save_all, "lowest_bytes": lowest, "export_s": export_s}
        if offload:
            alone = plan_at(binary, graph_path, budget,
                            os.path.join(tmp, "%s.recompute.json" % name))
            row["recompute_only_cost"] = plan_cost(alone) if alone else None
            row["cost"] = plan_cost(plan) if plan else None
            row["cost_unit"] = sweep["cost_unit"]
        if plan is None:
            row["fits"] = False
            rows.append(row)
            print("%s %s: no plan fits %d B" % (name, label, budget), file=sys.stderr)
            continue
        row["fits"] = True
        row.update(measure.measure_plan(model, inputs, plan, timed_steps=steps))
        rows.append(row)
        print("%s %s: predicted %d, measured %d (%+.4f%%), %s" %
              (name, label, row["predicted_bytes"], row["measured_bytes"],
               row["error_percent"], "bit-equal" if not row["differences"] else
               "DIFFERS: " + "; ".join(row["differences"][:3])), file=sys.stderr)
    return rows


def mib(n):
    return "%.2f" % (n / 2.0 ** 20)


def table(rows):
    lines = ["| model | budget | recomputed | predicted MiB | measured MiB | measured - predicted "
             "| error | eager MiB | bit-equal | predicted overhead | step time |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if not r["fits"]:
            lines.append("| %s | %s (%s MiB) | no plan fits | | | | | | | | |" %
                         (r["model"], r["budget"], mib(r["budget_bytes"])))
            continue
        lines.append("| %s | %s | %d | %s | %s | %+d B | %+.5f%% | %s | %s | %.1f%% | x%.2f |" % (
            r["model"], r["budget"], r["dropped_tensors"], mib(r["predicted_bytes"]),
            mib(r["measured_bytes"]), r["measured_bytes"] - r["predicted_bytes"],
            r["error_percent"], mib(r["eager_bytes"]),
            "yes" if not r["differences"] else "NO", r["predicted_overhead_percent"],
            r["step_time_ratio"]))
    return "\n".join(lines)


def offload_table(rows):
    lines = ["| model | budget | offloaded | recomputed | predicted MiB | measured MiB "
             "| measured - predicted | error | save-all MiB | host peak MiB | exposed us "
             "| cost, offload | cost, recompute only | bit-equal |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if not r["fits"]:
            lines.append("| %s | %s (%s MiB) | no plan fits | | | | | | | | | | | |" %
                         (r["model"], r["budget"], mib(r["budget_bytes"])))
            continue
        lines.append("| %s | %s | %d | %d | %s | %s | %+d B | %+.5f%% | %s | %s | %.1f "
                     "| %.3g | %.3g | %s |" % (
                         r["model"], r["budget"], r["offloaded_tensors"], r["dropped_tensors"],
                         mib(r["predicted_bytes"]), mib(r["measured_bytes"]),
                         r["measured_bytes"] - r["predicted_bytes"], r["error_percent"],
                         mib(r["save_all_bytes"]), mib(r["host_peak_bytes"]),
                         r["exposed_us"], r["cost"], r["recompute_only_cost"],
                         "yes" if not r["differences"] else "NO"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckptplan", default=os.path.join(HERE, "..", "build", "ckptplan"))
    parser.add_argument("--models", default=",".join(zoo.MODELS))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json", help="write every row's figures here")
    parser.add_argument("--host-link", help="plan with offload over this link (e.g. 25GB/s)")
    parser.add_argument("--compute-rate", help="FLOP/s timing nodes, with --host-link")
    args = parser.parse_args()
    offload = []
    if args.host_link:
        offload = ["--host-link", args.host_link]
        if args.compute_rate:
            offload += ["--compute-rate", args.compute_rate]
    warnings.filterwarnings("ignore")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_reality_") as tmp:
        for name in args.models.split(","):
            rows += bench_model(args.ckptplan, name, tmp, args.steps, offload)
    if offload:
        print("torch %s, %d threads; plans with %s; costs in the graph's unit (FLOP): "
              "recompute + exposed copy time" %
              (torch.__version__, torch.get_num_threads(), " ".join(offload)))
        print(offload_table(rows))
    else:
        print("torch %s, %d threads; step time: planned / eager, median of %d" %
              (torch.__version__, torch.get_num_threads(), args.steps))
        print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["fits"] and (r["error_percent"] > 1.0 or r["differences"])]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
