#!/usr/bin/python3
"""Approximate recompute, shown honestly (issue #23; docs/approximate-recompute.md).

Two small models trained here on CPU, plus the same architectures at random
initialisation (tests/torch/models.py's GPT and MLP, at the sizes below):
- gpt: a character-level GPT (2 blocks, width 128, 64 characters of context)
  on the licence texts in /usr/share/common-licenses;
- mlp: an MLP (256 -> 512 -> 512 -> 512 -> 10, GELU) on a synthetic task
  whose inputs lie near a 16-dimensional subspace, labelled by a random
  teacher.

  approx_demo.py train  [--models M] [--steps N] [--weight-decay W]
      trains, saves the weights to SCRATCH
  approx_demo.py report [--max-error E | gpt=E,mlp=E] [--rounds R] [--curve-steps N]
      per model: export --approximations, plan at a budget that needs
      recomputation exactly and with --max-error, measure save-all, exact and
      approximate checkpointing (peaks, gradient error; CPU time over R
      interleaved steps), optionally N-step training runs with the exact and
      the approximate plan; one table, issue 23's targets checked; then
      random weights at a tight --max-error
  approx_demo.py curves [--steps N]     the training runs alone

SCRATCH is $CKPTPLAN_DEMO_DIR or /tmp/ckptplan_approx_demo (weights, graphs
and plans; nothing is written into the repository). The model factories
(gpt_trained, mlp_trained, gpt_random, mlp_random) also serve
`python3 -m ckptplan_torch export|apply --model scripts/approx_demo.py:gpt_trained`.
Run it with `nice -n 10`: it keeps one to two cores busy for tens of minutes.
"""

import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
SCRATCH = os.environ.get("CKPTPLAN_DEMO_DIR", "/tmp/ckptplan_approx_demo")
CKPTPLAN = os.environ.get("CKPTPLAN", os.path.join(ROOT, "build", "ckptplan"))

SEQ, GPT_BATCH, VOCAB = 64, 16, 128
MLP_IN, MLP_HIDDEN, MLP_CLASSES, MLP_LATENT, MLP_BATCH = 256, 512, 10, 16, 512


# --------------------------------------------------------------------------
# Models (tests/torch/models.py's, at the demo's sizes) and data.

sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))
import models as test_models  # noqa: E402


def make_gpt():
    return test_models.GPT(vocab=VOCAB, d=128, heads=4, layers=2, seq=SEQ)


def make_mlp():
    return test_models.MLP(d_in=MLP_IN, hidden=MLP_HIDDEN, classes=MLP_CLASSES, depth=3,
                           activation=F.gelu)


def text():
    """The licence texts on this machine, as character codes below 128."""
    data = b"".join(open(p, "rb").read() for p in sorted(glob.glob(
        "/usr/share/common-licenses/*")) if os.path.isfile(p))
    return torch.tensor([c if c < VOCAB else 32 for c in data], dtype=torch.long)


class TextBatches:
    def __init__(self, seed):
        self.data = text()
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self):
        starts = torch.randint(0, len(self.data) - SEQ - 1, (GPT_BATCH,), generator=self.gen)
        idx = torch.stack([self.data[s:s + SEQ] for s in starts])
        targets = torch.stack([self.data[s + 1:s + SEQ + 1] for s in starts])
        return idx, targets


class LatentBatches:
    """x = z Q + 0.05 noise, z ~ N(0, I_16), Q a fixed 16 x 256 map; y from a
    fixed random two-layer teacher on z."""

    def __init__(self, seed):
        g = torch.Generator().manual_seed(1234)  # the task: the same for every seed
        self.q = torch.randn(MLP_LATENT, MLP_IN, generator=g) / math.sqrt(MLP_LATENT)
        self.t1 = torch.randn(MLP_LATENT, 64, generator=g)
        self.t2 = torch.randn(64, MLP_CLASSES, generator=g)
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self):
        z = torch.randn(MLP_BATCH, MLP_LATENT, generator=self.gen)
        x = z @ self.q + 0.05 * torch.randn(MLP_BATCH, MLP_IN, generator=self.gen)
        y = (torch.tanh(z @ self.t1) @ self.t2).argmax(1)
        return x, y


MODELS = {"gpt": (make_gpt, TextBatches), "mlp": (make_mlp, LatentBatches)}


def weights_path(name):
    return os.path.join(SCRATCH, name + ".pt")


def training(name):
    """How the saved weights were trained (weight decay 0.1 when unrecorded)."""
    try:
        with open(weights_path(name) + ".json") as f:
            return json.load(f)
    except OSError:
        return {"weight_decay": 0.1}


def _factory(name, trained):
    make, batches = MODELS[name]
    torch.manual_seed(0)
    model = make()
    if trained:
        model.load_state_dict(torch.load(weights_path(name)))
    # The measured batch: a fixed held-out draw (seed 99), not a training batch.
    return model, batches(99)()


def gpt_trained():
    return _factory("gpt", True)


def mlp_trained():
    return _factory("mlp", True)


def gpt_random():
    return _factory("gpt", False)


def mlp_random():
    return _factory("mlp", False)


# --------------------------------------------------------------------------
# train


def cmd_train(args):
    os.makedirs(SCRATCH, exist_ok=True)
    for name in args.models.split(","):
        make, batches = MODELS[name]
        torch.manual_seed(0)
        model = make()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        # Cosine from --lr down to --lr-min (constant when they are equal).
        lr_min = args.lr if args.lr_min is None else args.lr_min
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps, eta_min=lr_min)
        data = batches(0)
        start, losses = time.process_time(), []
        for step in range(args.steps):
            loss = model(*data())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if step % 100 == 0 or step == args.steps - 1:
                print("%s step %d loss %.4f (%.0f s CPU)" %
                      (name, step, statistics.mean(losses[-20:]), time.process_time() - start),
                      flush=True)
        torch.save(model.state_dict(), weights_path(name) + ".tmp")
        os.replace(weights_path(name) + ".tmp", weights_path(name))
        with open(weights_path(name) + ".json", "w") as f:
            json.dump({"steps": args.steps, "lr": args.lr, "lr_min": lr_min,
                       "weight_decay": args.weight_decay,
                       "final_loss": statistics.mean(losses[-20:])}, f)


# --------------------------------------------------------------------------
# report


def ckptplan(*args):
    return subprocess.run([CKPTPLAN, *args], check=True, capture_output=True,
                          text=True).stdout


def make_plan(graph_path, budget, out_path, max_error=None):
    """ckptplan plan at `budget` (with --max-error when given): the plan dict
    and the summary ckptplan printed."""
    args = ["plan", graph_path, "--budget", str(budget), "-o", out_path]
    if max_error is not None:
        args += ["--max-error", repr(max_error)]
    summary = ckptplan(*args)
    with open(out_path) as f:
        return json.load(f), summary


def recompute_flops(graph, plan, program):
    """FLOPs of the recompute steps `program` runs, each approximated node at
    its option's FLOPs: the plan's recompute cost, counted here from the graph."""
    ranks = {a["node"]: a["rank"] for a in plan.get("approximations") or []}
    total = 0.0
    for n, recompute in program.steps:
        if not recompute:
            continue
        node = graph["nodes"][n]
        if node["id"] in ranks:
            total += next(o["flops"] for o in node["approx"] if o["rank"] == ranks[node["id"]])
        else:
            total += node.get("flops", 0.0)
    return total


def measure_row(model, inputs, graph, plan, label):
    """Peaks (predicted, allocator-measured) and the gradient error against the
    eager step, from measure_plan; recompute FLOPs counted from the graph."""
    from ckptplan_torch import measure
    from ckptplan_torch.apply import apply_plan
    r = measure.measure_plan(model, inputs, plan, optimizer="adamw", timed_steps=0)
    applied = apply_plan(model, plan)
    applied.prepare(*inputs)
    return {
        "label": label,
        "approximations": len(plan.get("approximations") or []),
        "recomputed": r["dropped_tensors"],
        "predicted_bytes": r["predicted_bytes"],
        "measured_bytes": r["measured_bytes"],
        "factor_bytes": r.get("factor_bytes", 0),
        "recompute_mflop": recompute_flops(graph, plan, applied.program) / 1e6,
        "plan_recompute_mflop": plan.get("recompute_cost", 0.0) / 1e6,
        "gradient_error": r.get("gradient_error", 0.0),
        "estimated_error": plan.get("estimated_error", 0.0) or 0.0,
        "bit_equal": not r["differences"],
    }


def time_plans(name, plans, rounds, warmup=2):
    """CPU time of training steps (forward, backward, AdamW step) with each
    plan applied, on the held-out batch: one process, one thread, the plans
    interleaved (A B C, then C B A, ...) so that the machine's load drifts
    over all of them alike. Per plan: the medians over `rounds` steps of the
    step's process CPU time and of the CPU time in its recompute steps, timed
    directly by the applied program's runner (its clock, time.perf_counter,
    pointed at time.process_time for the duration), and the median over
    rounds of the per-round ratio of each plan's recompute time to the first
    plan's that recomputes."""
    import copy
    import types
    from unittest import mock

    from ckptplan_torch import apply as apply_module
    model, inputs = _factory(name, True)
    runs = []
    for label, plan in plans:
        m = copy.deepcopy(model)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3,
                                weight_decay=training(name)["weight_decay"])
        step = apply_module.apply_plan(m, plan)
        step.prepare(*inputs)
        runs.append((label, opt, step, {"step": [], "recompute": []}))
    cpu_clock = types.SimpleNamespace(perf_counter=time.process_time)
    with mock.patch.object(apply_module, "time", cpu_clock):
        for i in range(warmup + rounds):
            for label, opt, step, times in (runs if i % 2 == 0 else runs[::-1]):
                opt.zero_grad(set_to_none=True)
                step.runner.recompute_s = 0.0
                start = time.process_time()
                loss = step(*inputs)
                loss.backward()
                opt.step()
                elapsed = time.process_time() - start
                del loss
                if i >= warmup:
                    times["step"].append(elapsed)
                    times["recompute"].append(step.runner.recompute_s)
    out = {}
    reference = next((t for _, _, _, t in runs if sum(t["recompute"]) > 0), None)
    for label, _, _, times in runs:
        ratios = [a / b for a, b in zip(times["recompute"], reference["recompute"]) if b > 0] \
            if reference else []
        out[label] = {"step_ms": 1e3 * statistics.median(times["step"]),
                      "recompute_ms": 1e3 * statistics.median(times["recompute"]),
                      "recompute_ratio": statistics.median(ratios) if ratios else 0.0}
    return out


def parse_max_error(text, name):
    """--max-error E, or per model: gpt=0.05,mlp=0.1."""
    if "=" not in text:
        return float(text)
    values = dict(item.split("=", 1) for item in text.split(","))
    return float(values[name])


def report_model(name, max_error, rounds, fraction):
    import ckptplan_torch
    model, inputs = _factory(name, True)
    graph = ckptplan_torch.export_graph(model, inputs, optimizer="adamw", approximations=True)
    graph_path = os.path.join(SCRATCH, name + "_graph.json")
    ckptplan_torch.write_json(graph, graph_path)
    sweep = json.loads(ckptplan("sweep", graph_path, "--budgets", "1", "--json"))
    lowest = sweep["lowest_peak_bytes"]
    save_all, _ = make_plan(graph_path, 2 ** 50, os.path.join(SCRATCH, name + "_saveall.json"))
    top = save_all["save_all_peak_bytes"]
    budget = int(lowest + fraction * (top - lowest))
    exact, _ = make_plan(graph_path, budget, os.path.join(SCRATCH, name + "_exact.json"))
    approximate, summary = make_plan(graph_path, budget,
                                     os.path.join(SCRATCH, name + "_approx.json"), max_error)
    print("%s (%s): budget %d B (%.2f MiB; lowest %.2f, save-all %.2f MiB), --max-error %g" %
          (name, describe_training(name), budget, budget / 2.0 ** 20, lowest / 2.0 ** 20,
           top / 2.0 ** 20, max_error), flush=True)
    for line in summary.splitlines():
        if "approximations " in line or "recompute cost" in line or "exact recompute" in line:
            print("  ckptplan:" + line)
    for a in approximate.get("approximations") or []:
        print("  approximated %-10s rank %-3d error %.4f" % (a["node"], a["rank"], a["error"]))
    plans = (("save-all", save_all), ("exact checkpointing", exact),
             ("approximate checkpointing", approximate))
    rows = [measure_row(model, inputs, graph, plan, label) for label, plan in plans]
    times = time_plans(name, plans, rounds)
    for row in rows:
        row.update(times[row["label"]])
    return {"model": name, "budget": budget, "max_error": max_error, "rows": rows,
            "rounds": rounds, "summary": summary}


def describe_training(name):
    t = training(name)
    return "trained %s steps, AdamW lr %s%s, weight decay %s, final loss %s" % (
        t.get("steps", "?"), t.get("lr", "?"),
        "" if t.get("lr_min", t.get("lr")) == t.get("lr") else " cosine to %s" % t["lr_min"],
        t.get("weight_decay"), "%.3f" % t["final_loss"] if "final_loss" in t else "?")


def print_table(results, curves):
    mib = 2.0 ** 20
    print()
    print("| model | plan | recomputed | approximated | predicted MiB | measured MiB | "
          "recompute MFLOP | recompute CPU ms | step CPU ms | step - save-all ms | "
          "gradient error (estimate) | final loss |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        base = res["rows"][0]["step_ms"]
        run = curves.get(res["model"], {})
        for r in res["rows"]:
            loss = {"exact checkpointing": run.get("exact"),
                    "approximate checkpointing": run.get("approximate")}.get(r["label"])
            print("| %s | %s | %d | %d | %.3f | %.3f | %.1f | %.1f | %.1f | %+.1f | %s | %s |" % (
                res["model"], r["label"], r["recomputed"], r["approximations"],
                r["predicted_bytes"] / mib, r["measured_bytes"] / mib, r["recompute_mflop"],
                r["recompute_ms"], r["step_ms"], r["step_ms"] - base,
                "bit-equal" if r["bit_equal"] and not r["approximations"] else
                "%.4f (%.4f)" % (r["gradient_error"], r["estimated_error"]),
                "-" if loss is None else "%.4f" % loss))
    print()
    print("(times: medians of %s interleaved steps each, process CPU time, one thread; "
          "recompute CPU ms timed in the recompute steps themselves)" %
          ", ".join(sorted({str(res["rounds"]) for res in results})))
    for res in results:
        saveall, exact, approx_row = res["rows"]
        base = saveall["step_ms"]
        flops_less = 1 - approx_row["recompute_mflop"] / exact["recompute_mflop"]
        time_less = 1 - approx_row["recompute_ratio"] / exact["recompute_ratio"]
        diff_less = 1 - (approx_row["step_ms"] - base) / (exact["step_ms"] - base) \
            if exact["step_ms"] > base else float("nan")
        peak_gap = approx_row["measured_bytes"] / approx_row["predicted_bytes"] - 1
        run = curves.get(res["model"])
        loss_gap = run["approximate"] / run["exact"] - 1 if run else None
        print("%s: approximate vs exact checkpointing at %d B: recompute FLOPs %.1f%% less; "
              "recompute CPU time %.1f%% less (median of per-step ratios), step - save-all "
              "%.1f%% less; gradient error %.4f (estimate %.4f) vs --max-error %g; measured "
              "peak %+.2f%% vs predicted; final training loss %s" % (
                  res["model"], res["budget"], 100 * flops_less, 100 * time_less,
                  100 * diff_less, approx_row["gradient_error"], approx_row["estimated_error"],
                  res["max_error"], 100 * peak_gap,
                  "not run" if run is None else "%+.2f%% vs exact" % (100 * loss_gap)))
        verdict = [flops_less >= 0.30, time_less >= 0.30,
                   approx_row["gradient_error"] <= res["max_error"],
                   run is not None and abs(loss_gap) <= 0.01]
        print("  issue 23 targets (FLOPs >= 30%% less, time >= 30%% less, error <= bound, "
              "final loss within 1%%): %s" % ", ".join("yes" if v else "NO" for v in verdict))


def report_random(name, max_error, fraction):
    import ckptplan_torch
    model, inputs = _factory(name, False)
    graph = ckptplan_torch.export_graph(model, inputs, optimizer="adamw", approximations=True)
    graph_path = os.path.join(SCRATCH, name + "_random_graph.json")
    ckptplan_torch.write_json(graph, graph_path)
    sweep = json.loads(ckptplan("sweep", graph_path, "--budgets", "1", "--json"))
    save_all, _ = make_plan(graph_path, 2 ** 50, os.path.join(SCRATCH, name + "_r_all.json"))
    budget = int(sweep["lowest_peak_bytes"] + fraction *
                 (save_all["save_all_peak_bytes"] - sweep["lowest_peak_bytes"]))
    plan, summary = make_plan(graph_path, budget, os.path.join(SCRATCH, name + "_r.json"),
                              max_error)
    smallest = min(o["error"] for n in graph["nodes"] for o in n.get("approx", ()))
    print("%s, random weights, --max-error %g: %d approximations; the smallest option error "
          "of any linear node (re-run by the plan or not) is %.4f" %
          (name, max_error, len(plan.get("approximations") or []), smallest))
    print("  ckptplan: " + "\n  ckptplan: ".join(
        line for line in summary.splitlines() if "approx" in line.lower()))


def cmd_report(args):
    names = args.models.split(",")
    results = [report_model(name, parse_max_error(args.max_error, name), args.rounds,
                            args.fraction) for name in names]
    with open(os.path.join(SCRATCH, "report_%s.json" % "_".join(names)), "w") as f:
        json.dump(results, f, indent=1)
    curves = {}
    if args.curve_steps:
        for name in names:
            curves[name] = run_curves(name, args.curve_steps, args.lr)
    print_table(results, curves)
    print()
    for name in names if args.random_max_error > 0 else ():
        report_random(name, args.random_max_error, args.fraction)


# --------------------------------------------------------------------------
# curves


def train_with_plan(name, plan, steps, lr):
    """Losses of `steps` AdamW steps from the trained weights with `plan`
    applied, on the batch stream of seed 7, and the final held-out loss."""
    from ckptplan_torch.apply import apply_plan
    make, batches = MODELS[name]
    model, held_out = _factory(name, True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=training(name)["weight_decay"])
    step = apply_plan(model, plan)
    data = batches(7)
    losses = []
    for _ in range(steps):
        batch = data()
        opt.zero_grad(set_to_none=True)
        loss = step(*batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        held = model(*held_out).item()
    return losses, held


def cmd_curve_run(args):
    """One variant's run (a separate process, so the two variants run side by side)."""
    from ckptplan_torch.apply import exact_plan, load_plan
    approximate = load_plan(os.path.join(SCRATCH, args.models + "_approx.json"))
    plan = approximate if args.variant == "approximate" else exact_plan(approximate)
    start = time.process_time()
    losses, held = train_with_plan(args.models, plan, args.steps, args.lr)
    path = os.path.join(SCRATCH, "curve_%s_%s.json" % (args.models, args.variant))
    with open(path + ".tmp", "w") as f:
        json.dump({"losses": losses, "held_out": held,
                   "cpu_s": time.process_time() - start}, f)
    os.replace(path + ".tmp", path)


def run_curves(name, steps, lr):
    """The exact and the approximate plan's training runs (two processes side
    by side); prints the curves; returns the final training losses (mean of
    the last 20 steps) of both."""
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "curve-run",
                               "--models", name, "--variant", variant,
                               "--steps", str(steps), "--lr", str(lr)])
             for variant in ("exact", "approximate")]
    if any(p.wait() for p in procs):
        raise SystemExit("a training run failed")
    runs = {}
    for variant in ("exact", "approximate"):
        with open(os.path.join(SCRATCH, "curve_%s_%s.json" % (name, variant))) as f:
            runs[variant] = json.load(f)
    exact, approx_ = runs["exact"]["losses"], runs["approximate"]["losses"]
    print("%s: %d AdamW steps from the trained weights (lr %g), same batches; training "
          "loss, mean of 10 steps: exact | approximate recompute" % (name, steps, lr))
    for i in list(range(9, steps, max(1, steps // 6))) + [steps - 1]:
        window = slice(max(0, i - 9), i + 1)
        print("  step %4d  %.4f | %.4f" % (i + 1, statistics.mean(exact[window]),
                                          statistics.mean(approx_[window])))
    fe, fa = statistics.mean(exact[-20:]), statistics.mean(approx_[-20:])
    he, ha = runs["exact"]["held_out"], runs["approximate"]["held_out"]
    print("%s: final training loss (mean of the last 20 steps) exact %.4f, approximate "
          "%.4f (%+.2f%%); held-out batch after training: exact %.4f, approximate %.4f "
          "(%+.2f%%)" % (name, fe, fa, 100.0 * (fa - fe) / fe, he, ha,
                         100.0 * (ha - he) / he), flush=True)
    return {"exact": fe, "approximate": fa}


def cmd_curves(args):
    for name in args.models.split(","):
        run_curves(name, args.steps, args.lr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--models", default="gpt,mlp")
    tr.add_argument("--steps", type=int, default=1500)
    tr.add_argument("--lr", type=float, default=3e-3)
    tr.add_argument("--lr-min", type=float, default=None,
                    help="cosine schedule from --lr down to this (default: constant --lr)")
    tr.add_argument("--weight-decay", type=float, default=0.1)
    rp = sub.add_parser("report")
    rp.add_argument("--models", default="gpt,mlp")
    rp.add_argument("--max-error", default="0.05",
                    help="E, or per model: gpt=0.05,mlp=0.1")
    rp.add_argument("--random-max-error", type=float, default=0.01,
                    help="bound for the random-weight plans (0: skip them)")
    rp.add_argument("--fraction", type=float, default=0.25,
                    help="budget: lowest + FRACTION x (save-all - lowest)")
    rp.add_argument("--rounds", type=int, default=20,
                    help="timed steps per plan, interleaved")
    rp.add_argument("--curve-steps", type=int, default=0,
                    help="then N-step training runs with the exact and the approximate plan "
                    "(0: none; the curves command runs them alone)")
    rp.add_argument("--lr", type=float, default=1e-3, help="the training runs' learning rate")
    cu = sub.add_parser("curves")
    cu.add_argument("--models", default="gpt,mlp")
    cu.add_argument("--steps", type=int, default=300)
    cu.add_argument("--lr", type=float, default=1e-3)
    cr = sub.add_parser("curve-run")
    cr.add_argument("--models", required=True)
    cr.add_argument("--variant", choices=["exact", "approximate"], required=True)
    cr.add_argument("--steps", type=int, required=True)
    cr.add_argument("--lr", type=float, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    return {"train": cmd_train, "report": cmd_report, "curves": cmd_curves,
            "curve-run": cmd_curve_run}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
