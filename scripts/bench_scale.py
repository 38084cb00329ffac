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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/ckptplan")
    parser.add_argument("--sizes", default="1e3,gpt2,1e4,1e5,1e6")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-runs", type=int, default=1)
    parser.add_argument("--small-runs", type=int, default=21)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--plan-timeout", type=float, default=600)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--strategy", default="ckptplan",
                        help="plan --strategy: ckptplan (the default search) or greedy")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="ckptplan_bench_")
    os.makedirs(workdir, exist_ok=True)

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
