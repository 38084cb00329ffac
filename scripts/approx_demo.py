#!/usr/bin/python3
"""Approximate recompute, shown honestly (issue #23; docs/approximate-recompute.md).

Two small models trained here on CPU, plus the same architecture at random
initialisation:
- gpt: a character-level GPT (2 blocks, width 128, 64 characters of context)
  on the licence texts in /usr/share/common-licenses;
- mlp: an MLP (256 -> 512 -> 512 -> 512 -> 10) on a synthetic task whose
  inputs lie near a 16-dimensional subspace, labelled by a random teacher.

  approx_demo.py train  [--steps N]     trains both, saves the weights to SCRATCH
  approx_demo.py report [--max-error E] per model: export --approximations, plan at a
      budget that needs recomputation exactly and with --max-error, apply and
      measure save-all, exact and approximate checkpointing; random weights at
      a tight --max-error
  approx_demo.py curves [--steps N]     short training runs from the trained
      weights with the exact and the approximate plan; final losses

SCRATCH is $CKPTPLAN_DEMO_DIR or /tmp/ckptplan_approx_demo (weights, graphs
and plans; nothing is written into the repository). The model factories
(gpt_trained, mlp_trained, gpt_random, mlp_random) also serve
`python3 -m ckptplan_torch export|apply --model scripts/approx_demo.py:gpt_trained`.
Run it with `nice -n 10`: it keeps one core busy for tens of minutes.
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
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
SCRATCH = os.environ.get("CKPTPLAN_DEMO_DIR", "/tmp/ckptplan_approx_demo")
CKPTPLAN = os.environ.get("CKPTPLAN", os.path.join(ROOT, "build", "ckptplan"))

SEQ, GPT_BATCH, VOCAB = 64, 16, 128
MLP_IN, MLP_HIDDEN, MLP_CLASSES, MLP_LATENT, MLP_BATCH = 256, 512, 10, 16, 512


# --------------------------------------------------------------------------
# Models and data.


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_out = nn.Linear(4 * d, d)

    def attention(self, x):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.reshape(b, t, h, c // h).transpose(1, 2)
        k = k.reshape(b, t, h, c // h).transpose(1, 2)
        v = v.reshape(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        del mask
        y = att @ v
        del att, q, k, v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.c_out(F.gelu(self.c_fc(self.ln_2(x))))


class CharGPT(nn.Module):
    def __init__(self, d=128, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(SEQ, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        x = self.lm_head(self.ln_f(x))
        return F.cross_entropy(x.reshape(b * t, -1), targets.reshape(b * t))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        dims = [MLP_IN] + [MLP_HIDDEN] * 3
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(MLP_HIDDEN, MLP_CLASSES)

    def forward(self, x, y):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return F.cross_entropy(self.head(x), y)


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


MODELS = {"gpt": (CharGPT, TextBatches), "mlp": (MLP, LatentBatches)}


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
        data = batches(0)
        start, losses = time.process_time(), []
        for step in range(args.steps):
            loss = model(*data())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step % 100 == 0 or step == args.steps - 1:
                print("%s step %d loss %.4f (%.0f s CPU)" %
                      (name, step, statistics.mean(losses[-20:]), time.process_time() - start),
                      flush=True)
        torch.save(model.state_dict(), weights_path(name) + ".tmp")
        os.replace(weights_path(name) + ".tmp", weights_path(name))
        with open(weights_path(name) + ".json", "w") as f:
            json.dump({"steps": args.steps, "lr": args.lr, "weight_decay": args.weight_decay,
                       "final_loss": statistics.mean(losses[-20:])}, f)


# --------------------------------------------------------------------------
# report


def ckptplan(*args):
    return subprocess.run([CKPTPLAN, *args], check=True, capture_output=True,
                          text=True).stdout


def planner_has_max_error():
    return "--max-error" in ckptplan("plan", "--help")


def make_plan(graph_path, budget, out_path, max_error=None):
    """ckptplan plan at `budget` (with --max-error when given); the plan dict
    and the summary ckptplan printed. A ckptplan without --max-error: its
    exact plan, approximated by stand_in_approximations."""
    args = ["plan", graph_path, "--budget", str(budget), "-o", out_path]
    native = max_error is not None and planner_has_max_error()
    if native:
        args += ["--max-error", repr(max_error)]
    summary = ckptplan(*args)
    with open(out_path) as f:
        plan = json.load(f)
    if max_error is not None and not native:
        with open(graph_path) as f:
            plan = stand_in_approximations(plan, json.load(f), max_error)
        with open(out_path, "w") as f:
            json.dump(plan, f, indent=1)
        summary += "(approximations chosen by approx_demo.py's stand-in: no --max-error here)\n"
    return plan, summary


def stand_in_approximations(plan, graph, max_error):
    """For a ckptplan without --max-error: the exact plan's decisions, with
    options of the linear nodes its chains re-run chosen greedily by FLOPs
    saved per unit of error while the summed error stays <= max_error (one
    option per node; ties by node id, then rank). Memory is the exact plan's."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    rerun = sorted({c for d in plan["decisions"] if d["action"] == "recompute"
                    for c in d.get("chain", ()) if nodes[c].get("approx")})
    options = []
    for node_id in rerun:
        for o in nodes[node_id]["approx"]:
            saved = nodes[node_id]["flops"] - o["flops"]
            if saved > 0:
                options.append((-saved / max(o["error"], 1e-12), node_id, o["rank"], o, saved))
    chosen, total = {}, 0.0
    for _, node_id, _, o, saved in sorted(options, key=lambda x: x[:3]):
        if node_id not in chosen and total + o["error"] <= max_error:
            chosen[node_id] = (o, saved)
            total += o["error"]
    doc = dict(plan, max_error=max_error, estimated_error=total,
               approximations=[{"node": n, "rank": o["rank"], "error": o["error"],
                                "cost_saved": saved} for n, (o, saved) in sorted(chosen.items())])
    doc["recompute_cost"] = plan["recompute_cost"] - sum(v[1] for v in chosen.values())
    doc["decisions"] = [dict(d, action="recompute_approx")
                        if d["action"] == "recompute" and set(d.get("chain", ())) & set(chosen)
                        else d for d in plan["decisions"]]
    return doc


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


def measure_row(model, inputs, graph, plan, label, steps):
    from ckptplan_torch import measure
    from ckptplan_torch.apply import apply_plan
    r = measure.measure_plan(model, inputs, plan, optimizer="adamw", timed_steps=steps)
    applied = apply_plan(model, plan)
    applied.prepare(*inputs)
    flops = recompute_flops(graph, plan, applied.program)
    return {
        "label": label,
        "approximations": len(plan.get("approximations") or []),
        "recomputed": r["dropped_tensors"],
        "predicted_mib": r["predicted_bytes"] / 2.0 ** 20,
        "measured_mib": r["measured_bytes"] / 2.0 ** 20,
        "recompute_mflop": flops / 1e6,
        "plan_recompute_mflop": plan.get("recompute_cost", 0.0) / 1e6,
        "recompute_ms": 1e3 * r["recompute_s"],
        "step_ms": 1e3 * r["planned_step_s"],
        "gradient_error": r.get("gradient_error", 0.0),
        "estimated_error": plan.get("estimated_error", 0.0) or 0.0,
        "bit_equal": not r["differences"],
    }


def report_model(name, max_error, steps, fraction):
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
    print("%s: budget %d B (%.2f MiB; lowest %.2f, save-all %.2f MiB), --max-error %g" %
          (name, budget, budget / 2.0 ** 20, lowest / 2.0 ** 20, top / 2.0 ** 20, max_error))
    rows = [measure_row(model, inputs, graph, plan, label, steps) for label, plan in
            (("save-all", save_all), ("exact checkpointing", exact),
             ("approximate checkpointing", approximate))]
    for a in approximate.get("approximations") or []:
        print("  approximated %-10s rank %-3d error %.4f" % (a["node"], a["rank"], a["error"]))
    return {"model": name, "budget": budget, "max_error": max_error, "rows": rows,
            "summary": summary}


def print_table(results):
    print()
    print("| model | plan | recomputed | approximated | predicted MiB | measured MiB | "
          "recompute MFLOP | recompute ms | step ms | gradient error (estimate) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        for r in res["rows"]:
            print("| %s | %s | %d | %d | %.2f | %.2f | %.1f | %.1f | %.1f | %s |" % (
                res["model"], r["label"], r["recomputed"], r["approximations"],
                r["predicted_mib"], r["measured_mib"], r["recompute_mflop"],
                r["recompute_ms"], r["step_ms"],
                "bit-equal" if r["bit_equal"] and not r["approximations"] else
                "%.4f (%.4f)" % (r["gradient_error"], r["estimated_error"])))
    print()
    for res in results:
        exact, approx_row = res["rows"][1], res["rows"][2]
        print("%s: approximate vs exact recompute: FLOPs %.1f%% less, measured recompute "
              "time %.1f%% less, step time x%.3f; gradient error %.4f <= --max-error %g: %s" % (
                  res["model"],
                  100.0 * (1 - approx_row["recompute_mflop"] / exact["recompute_mflop"]),
                  100.0 * (1 - approx_row["recompute_ms"] / exact["recompute_ms"]),
                  approx_row["step_ms"] / exact["step_ms"], approx_row["gradient_error"],
                  res["max_error"], "yes" if approx_row["gradient_error"] <= res["max_error"]
                  else "NO"))


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
    results = [report_model(name, args.max_error, args.steps, args.fraction)
               for name in args.models.split(",")]
    print_table(results)
    print()
    for name in args.models.split(",") if args.random_max_error > 0 else ():
        report_random(name, args.random_max_error, args.fraction)
    with open(os.path.join(SCRATCH, "report.json"), "w") as f:
        json.dump(results, f, indent=1)


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


def cmd_curves(args):
    for name in args.models.split(","):
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "curve-run",
                                   "--models", name, "--variant", variant,
                                   "--steps", str(args.steps), "--lr", str(args.lr)])
                 for variant in ("exact", "approximate")]
        if any(p.wait() for p in procs):
            raise SystemExit("a training run failed")
        runs = {}
        for variant in ("exact", "approximate"):
            with open(os.path.join(SCRATCH, "curve_%s_%s.json" % (name, variant))) as f:
                runs[variant] = json.load(f)
        exact, approx_ = runs["exact"]["losses"], runs["approximate"]["losses"]
        print("%s: %d AdamW steps from the trained weights (lr %g), same batches; training "
              "loss, mean of 10 steps: exact | approximate recompute" %
              (name, args.steps, args.lr))
        for i in list(range(9, args.steps, max(1, args.steps // 6))) + [args.steps - 1]:
            window = slice(max(0, i - 9), i + 1)
            print("  step %4d  %.4f | %.4f" % (i + 1, statistics.mean(exact[window]),
                                              statistics.mean(approx_[window])))
        fe, fa = statistics.mean(exact[-20:]), statistics.mean(approx_[-20:])
        he, ha = runs["exact"]["held_out"], runs["approximate"]["held_out"]
        print("%s: final training loss (mean of the last 20 steps) exact %.4f, approximate "
              "%.4f (%+.2f%%); held-out batch after training: exact %.4f, approximate %.4f "
              "(%+.2f%%); CPU %.0f s vs %.0f s" %
              (name, fe, fa, 100.0 * (fa - fe) / fe, he, ha, 100.0 * (ha - he) / he,
               runs["exact"]["cpu_s"], runs["approximate"]["cpu_s"]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--models", default="gpt,mlp")
    tr.add_argument("--steps", type=int, default=1500)
    tr.add_argument("--lr", type=float, default=3e-3)
    tr.add_argument("--weight-decay", type=float, default=0.1)
    rp = sub.add_parser("report")
    rp.add_argument("--models", default="gpt,mlp")
    rp.add_argument("--max-error", type=float, default=0.05)
    rp.add_argument("--random-max-error", type=float, default=0.01,
                    help="bound for the random-weight plans (0: skip them)")
    rp.add_argument("--fraction", type=float, default=0.25,
                    help="budget: lowest + FRACTION x (save-all - lowest)")
    rp.add_argument("--steps", type=int, default=5, help="timed steps per plan")
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
