#!/usr/bin/env python3
"""Planning time and recompute cost of `plan --max-error` on generated transformers.

Generates GPT-2-style graphs (`ckptplan generate transformer`), gives every forward linear
that reads a weight (mm, addmm, bmm, matmul; the weight read directly, through a view or a
cast) three synthetic approx options: ranks 32, 96, 192 at 10%, 25%, 50% of the node's flops
and errors 0.004, 0.0015, 0.0005 (made up: this measures the planner, not an approximation).
Then plans each halfway between its lower bound and its save-all peak, exactly and with --max-error 1%, and prints per
graph the median CPU seconds (user + sys of the child, 3 runs) and the recompute costs.

Usage: scripts/bench_approx.py [--binary build/ckptplan] [--layers 2,12] [--runs 3]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

WEIGHT_OPS = {"t", "transpose", "permute", "view", "reshape", "_to_copy", "to", "clone",
              "contiguous", "expand"}
OPTIONS = ((32, 0.10, 0.004), (96, 0.25, 0.0015), (192, 0.50, 0.0005))


def add_options(graph):
    """Adds OPTIONS to forward linears reading a weight; returns how many."""
    tensors = {t["id"]: t for t in graph["tensors"]}
    producer = {}
    for node in graph["nodes"]:
        for out in node.get("outputs", []):
            producer.setdefault(out, node)

    def is_weight(tid, hops=3):
        while "alias_of" in tensors[tid]:
            tid = tensors[tid]["alias_of"]
        if tensors[tid].get("kind") == "parameter":
            return True
        node = producer.get(tid)
        if hops == 0 or node is None or node["phase"] != "forward" or node["op"] not in WEIGHT_OPS:
            return False
        return any(is_weight(i, hops - 1) for i in node.get("inputs", []))

    count = 0
    for node in graph["nodes"]:
        if node["phase"] != "forward" or node["op"] not in ("mm", "addmm", "bmm", "matmul"):
            continue
        flops = node.get("flops", 0)
        if flops <= 0 or not any(is_weight(i) for i in node.get("inputs", [])):
            continue
        node["approx"] = [{"rank": r, "flops": round(flops * share), "error": error}
                          for r, share, error in OPTIONS]
        count += 1
    return count


def timed(command):
    """(stdout, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/ckptplan")
    parser.add_argument("--layers", default="2,12")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("layers nodes linears | exact: cpu_s recompute | approx 1%: cpu_s recompute "
          "approximated error | cost ratio")
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(x) for x in args.layers.split(",")]:
            path = os.path.join(tmp, "t%d.json" % layers)
            subprocess.run([args.binary, "generate", "transformer", "--layers", str(layers),
                            "-o", path], check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                graph = json.load(f)
            linears = add_options(graph)
            with open(path, "w") as f:
                json.dump(graph, f)
            sim = json.loads(subprocess.run([args.binary, "simulate", path, "--json"], check=True,
                                            capture_output=True, text=True).stdout)
            bound = sim["lower_bound_bytes"]
            budget = str(int(bound + 0.5 * (sim["peak_bytes"] - bound)))
            rows = {}
            for label, extra in (("exact", []), ("approx", ["--max-error", "1%"])):
                seconds, summary = [], None
                for _ in range(args.runs):
                    out, cpu = timed([args.binary, "plan", path, "--budget", budget, "--json"] +
                                     extra)
                    seconds.append(cpu)
                    summary = json.loads(out)
                rows[label] = (statistics.median(seconds), summary)
            exact_s, exact = rows["exact"]
            approx_s, approx = rows["approx"]
            print("%6d %5d %7d | %6.2f %.4g | %6.2f %.4g %d %.4g | %.3f" % (
                layers, len(graph["nodes"]), linears, exact_s, exact["recompute_cost"], approx_s,
                approx["recompute_cost"], len(approx.get("approximations", [])),
                approx.get("estimated_error", 0),
                approx["recompute_cost"] / exact["recompute_cost"] if exact["recompute_cost"]
                else 1.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
