#!/usr/bin/python3
"""`python3 -m ckptplan_torch apply --measure` on a small conv net with
BatchNorm, in-place ReLU and Hardswish and dropout, planned at the lowest
budget `ckptplan sweep` reaches:
- exits 0: measured peak within 1% of predicted (printed; 4 bytes apart when
  written), loss, gradients, parameters and buffers bit-equal to eager;
- exits 4 on the same plan with its predicted peak edited 5% down;
- exits 3, naming bernoulli_, on a plan edited to recompute the dropout mask;
- exits 0, bit-equal, on a plan that recomputes every candidate but the mask
  (BatchNorm re-run without touching its statistics, the in-place ReLU and
  Hardswish re-run from recomputed inputs), its peak from `ckptplan simulate
  --plan`.
Then on the 2-layer GPT of tests/torch/models.py at 80% of its save-all peak,
where each attention's `_softmax` and a view of it (`_reshape_alias` <-
`expand`) are both saved candidates of one storage: the plan recomputes both
of a pair (its storage freed after the forward, re-made from `_softmax`'s
chain), and applied it measures its predicted peak within 0.1%, bit-equal to
eager.

Usage: torch_apply_test.py CKPTPLAN_BINARY. Exits 77 (skipped) without torch."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
from torch_test_util import ckptplan, model_spec, write_json as write  # noqa: E402

MODEL = model_spec("make_convnet")
GPT = model_spec("make_gpt")


def apply(plan_path, *extra, model=MODEL):
    out = subprocess.run([sys.executable, "-m", "ckptplan_torch", "apply", "--model", model,
                          "--plan", plan_path, "--measure", "--steps", "0", *extra],
                         capture_output=True, text=True)
    print(out.stdout + out.stderr)
    return out


def apply_measured(plan_path, plan, model=MODEL):
    """Applies `plan` (read from plan_path): exit 0, its predicted peak measured within 0.1%,
    bit-equal to eager. Returns the predicted peak."""
    out = apply(plan_path, model=model)
    assert out.returncode == 0, out.returncode
    m = re.search(r"predicted (\d+) B .* measured (\d+) B", out.stdout)
    predicted, measured = int(m.group(1)), int(m.group(2))
    assert predicted == plan["predicted_peak_bytes"]
    assert abs(measured - predicted) <= 0.001 * predicted, (measured, predicted)
    assert "bit-equal to the eager step" in out.stdout
    return predicted


def main():
    with tempfile.TemporaryDirectory(prefix="ckptplan_apply_") as tmp:
        run(tmp)
        run_gpt(tmp)


def run(tmp):
    graph = os.path.join(tmp, "convnet.json")
    plan_path = os.path.join(tmp, "plan.json")
    subprocess.run([sys.executable, "-m", "ckptplan_torch", "export", "--model", MODEL,
                    "-o", graph], check=True)
    sweep = json.loads(ckptplan("sweep", graph, "--budgets", "1", "--json"))
    lowest = sweep["lowest_peak_bytes"]
    ckptplan("plan", graph, "--budget", str(lowest), "-o", plan_path)
    with open(plan_path) as f:
        plan = json.load(f)
    recomputed = [d["tensor"] for d in plan["decisions"] if d["action"] == "recompute"]
    assert recomputed, "the lowest plan recomputes nothing"

    predicted = apply_measured(plan_path, plan)

    # A prediction below what the step needs: the measured peak exceeds it.
    low = dict(plan, predicted_peak_bytes=int(predicted * 0.95))
    write(os.path.join(tmp, "low.json"), low)
    out = apply(os.path.join(tmp, "low.json"))
    assert out.returncode == 4, out.returncode
    assert "over the prediction" in out.stderr

    # Recomputing the dropout mask would re-run bernoulli_: refused.
    with open(graph) as f:
        nodes = json.load(f)["nodes"]
    made_by = {t: n for n in nodes for t in n["outputs"]}
    masks = [d["tensor"] for d in plan["decisions"]
             if made_by[d["tensor"]]["op"] == "aten.div.Scalar" and d["action"] == "save"]
    assert masks, "no dropout mask among the candidates"
    edited = dict(plan, decisions=[dict(d, action="recompute") if d["tensor"] == masks[0]
                                   else d for d in plan["decisions"]])
    write(os.path.join(tmp, "random.json"), edited)
    out = apply(os.path.join(tmp, "random.json"))
    assert out.returncode == 3, out.returncode
    assert "random op" in out.stderr and "bernoulli" in out.stderr

    # Everything recomputed but the mask.
    everything = dict(plan, decisions=[dict(d, action="save" if d["tensor"] in masks
                                            else "recompute") for d in plan["decisions"]])
    all_path = os.path.join(tmp, "all.json")
    write(all_path, everything)
    sim = json.loads(ckptplan("simulate", graph, "--plan", all_path, "--json"))
    everything["predicted_peak_bytes"] = sim["peak_bytes"]
    write(all_path, everything)
    ops = {made_by[d["tensor"]]["op"] for d in everything["decisions"]
           if d["action"] == "recompute"}
    assert {"aten.native_batch_norm.default", "aten.relu.default"} <= ops, ops
    out = apply(all_path)
    assert out.returncode == 0, out.returncode
    assert "bit-equal to the eager step" in out.stdout


def run_gpt(tmp):
    graph_path = os.path.join(tmp, "gpt.json")
    plan_path = os.path.join(tmp, "gpt_plan.json")
    subprocess.run([sys.executable, "-m", "ckptplan_torch", "export", "--model", GPT,
                    "-o", graph_path], check=True)
    save_all = json.loads(ckptplan("simulate", graph_path, "--json"))["peak_bytes"]
    ckptplan("plan", graph_path, "--budget", str(save_all * 8 // 10), "-o", plan_path)
    with open(graph_path) as f:
        graph = json.load(f)
    with open(plan_path) as f:
        plan = json.load(f)
    alias_of = {t["id"]: t.get("alias_of") for t in graph["tensors"]}

    def root(t):
        while alias_of.get(t):
            t = alias_of[t]
        return t

    recomputed = [d["tensor"] for d in plan["decisions"] if d["action"] == "recompute"]
    # A _softmax recomputed with a view of it that is a candidate too.
    pairs = [(t, v) for t in recomputed if t.startswith("_softmax")
             for v in recomputed if v != t and root(v) == t]
    assert pairs, recomputed
    apply_measured(plan_path, plan, model=GPT)
    print("PASS")


if __name__ == "__main__":
    main()
