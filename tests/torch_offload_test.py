#!/usr/bin/python3
"""Applied offload plans, measured at the allocator (docs/offload.md).

The 2-layer GPT of tests/torch/models.py, planned half way from its lowest
recompute-only peak to save-all with --host-link 25GB/s: the plan offloads
some tensors and recomputes others. Applied with ckptplan_torch.measure:
- the measured peak (profiler allocator events) is the predicted one within
  0.01%, and loss, gradients, parameters and buffers are bit-equal to eager;
- the same plan with its offloads turned into saves measures more than 1%
  over the same prediction, so the offloaded bytes really left the
  allocator;
- a plan whose offload names a node not in the graph is refused.

Usage: torch_offload_test.py CKPTPLAN_BINARY. Exits 77 (skipped) without torch."""
import json
import os
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
from torch_test_util import ckptplan  # noqa: E402  (exits 77 without torch)
import torch  # noqa: E402
import ckptplan_torch  # noqa: E402
from ckptplan_torch import measure  # noqa: E402
import models  # noqa: E402


def main():
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model, inputs = models.make_gpt()
    with tempfile.TemporaryDirectory(prefix="ckptplan_offload_") as tmp:
        graph = os.path.join(tmp, "gpt.json")
        ckptplan_torch.write_json(ckptplan_torch.export_graph(model, inputs), graph)
        sweep = json.loads(ckptplan("sweep", graph, "--budgets", "1", "--json"))
        save_all, lowest = sweep["save_all_peak_bytes"], sweep["lowest_peak_bytes"]
        budget = (save_all + lowest) // 2
        plan_path = os.path.join(tmp, "plan.json")
        ckptplan("plan", graph, "--budget", str(budget), "--host-link", "25GB/s",
                 "--compute-rate", "1e12", "-o", plan_path)
        ckptplan("simulate", graph, "--plan", plan_path)  # re-simulates (exit 0)
        with open(plan_path) as f:
            plan = json.load(f)
    actions = [d["action"] for d in plan["decisions"]]
    assert "offload" in actions and "recompute" in actions, actions
    offloaded_bytes = sum(d["bytes"] for d in plan["decisions"] if d["action"] == "offload")

    r = measure.measure_plan(model, inputs, plan, timed_steps=0)
    print("offload plan: %d offloaded (%d B), %d recomputed; predicted %d B, measured %d B "
          "(%+.5f%%)" % (r["offloaded_tensors"], offloaded_bytes, r["dropped_tensors"],
                         r["predicted_bytes"], r["measured_bytes"], r["error_percent"]))
    assert r["offloaded_tensors"] == actions.count("offload")
    assert abs(r["measured_bytes"] - r["predicted_bytes"]) <= 1e-4 * r["predicted_bytes"], r
    assert not r["differences"], r["differences"]

    # The offloads kept on the device instead: same prediction, more bytes
    # (the recompute chains then differ from the plan's: they are left out).
    kept = dict(plan, decisions=[{"tensor": d["tensor"],
                                  "action": "save" if d["action"] == "offload" else d["action"]}
                                 for d in plan["decisions"]])
    k = measure.measure_plan(model, inputs, kept, timed_steps=0)
    print("offloads saved instead: measured %d B (%+.3f%% over the offload plan's prediction)"
          % (k["measured_bytes"], k["error_percent"]))
    assert k["measured_bytes"] > 1.01 * r["predicted_bytes"], k
    assert not k["differences"], k["differences"]

    bad = dict(plan, decisions=[dict(d, reloaded_before="no_such_node")
                                if d["action"] == "offload" else d
                                for d in plan["decisions"]])
    try:
        ckptplan_torch.apply_plan(model, bad).prepare(*inputs)
    except ckptplan_torch.PlanError as e:
        assert "no_such_node" in str(e), e
    else:
        raise AssertionError("a plan reloading before an unknown node was applied")
    print("OK")


if __name__ == "__main__":
    main()
