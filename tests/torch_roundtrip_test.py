#!/usr/bin/python3
"""End-to-end on a GPT-style model: `python3 -m ckptplan_torch export`, plan
at a budget that forces recompute, apply the plan with
ckptplan_torch.apply_plan and measure one Adam step: the allocator's peak
equals the plan's predicted peak within 0.1%, and the loss, every gradient,
every parameter after the step and every buffer equal the unplanned eager
step's bit for bit. Also: `ckptplan export --to pytorch-sac` keys agree with
ckptplan_torch.frameworks.sac_policy.

Usage: torch_roundtrip_test.py CKPTPLAN_BINARY. Exits 77 (skipped) when
PyTorch is not installed."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
from torch_test_util import ckptplan, model_spec  # noqa: E402  (exits 77 without torch)
import ckptplan_torch  # noqa: E402
from ckptplan_torch import frameworks, measure  # noqa: E402
import models  # noqa: E402


def main():
    with tempfile.TemporaryDirectory(prefix="ckptplan_torch_") as tmp:
        run(tmp)


def run(tmp):
    graph_path = os.path.join(tmp, "gpt.json")
    plan_path = os.path.join(tmp, "plan.json")
    # The exporter's command line (make_gpt's defaults: 2 layers).
    subprocess.run([sys.executable, "-m", "ckptplan_torch", "export", "--model",
                    model_spec("make_gpt"), "-o", graph_path],
                   check=True, capture_output=True)
    with open(graph_path) as f:
        graph = json.load(f)

    sim = json.loads(ckptplan("simulate", graph_path, "--json"))
    peak, bound = sim["save_all_peak_bytes"], sim["lower_bound_bytes"]
    budget = bound + (peak - bound) // 3  # well below save-all: forces recompute
    ckptplan("plan", graph_path, "--budget", str(budget), "-o", plan_path)
    plan = ckptplan_torch.load_plan(plan_path)
    recomputed = [d["tensor"] for d in plan["decisions"] if d["action"] == "recompute"]
    assert recomputed, "budget %d did not force recompute" % budget
    assert plan["predicted_peak_bytes"] <= budget

    model, inputs = models.make_gpt(layers=2)
    r = measure.measure_plan(model, inputs, plan, timed_steps=1)
    print("budget %d B, %d of %d candidates recomputed; step peak predicted %d B, measured "
          "%d B (%+.4f%%), eager %d B" %
          (budget, len(recomputed), len(plan["decisions"]), r["predicted_bytes"],
           r["measured_bytes"], r["error_percent"], r["eager_bytes"]))
    assert abs(r["error_percent"]) <= 0.1, r
    assert r["measured_bytes"] < r["eager_bytes"], "the plan used no less memory than eager"
    assert not r["differences"], r["differences"]
    print("loss, %d gradients, parameters and buffers equal the eager step's (2 steps)" %
          len(list(model.parameters())))

    # Selective checkpointing keys (PyTorch 2.4+ runs them) agree with
    # `ckptplan export --to pytorch-sac`.
    exported = json.loads(ckptplan("export", plan_path, "--to", "pytorch-sac"))
    policy = frameworks.sac_policy(plan, graph)
    assert frameworks.sac_policy_from_export(exported) == \
        {key: True for key, save in policy.items() if save}
    print("PASS")


if __name__ == "__main__":
    main()
