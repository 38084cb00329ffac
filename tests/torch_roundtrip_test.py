#!/usr/bin/python3
"""End-to-end: export a GPT-style model, plan it at a budget that forces
recompute, apply the plan through the joint-graph route (a), run a training
step and check that the forward keeps the bytes the plan predicts (within 5%)
and that the loss and gradients equal the unplanned model's.

Usage: torch_roundtrip_test.py CKPTPLAN_BINARY. Exits 77 (skipped) when
PyTorch is not installed."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "torch"))
try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch)")
    sys.exit(77)
import ckptplan_torch  # noqa: E402
import models  # noqa: E402


def ckptplan(*args):
    out = subprocess.run([sys.argv[1], *args], check=True, capture_output=True, text=True)
    return out.stdout


def main():
    with tempfile.TemporaryDirectory(prefix="ckptplan_torch_") as tmp:
        run(tmp)


def run(tmp):
    graph_path = os.path.join(tmp, "gpt.json")
    plan_path = os.path.join(tmp, "plan.json")
    # The exporter's command line (make_gpt's defaults: 2 layers).
    subprocess.run([sys.executable, os.path.join(HERE, "..", "scripts", "export_torch.py"),
                    "--model", os.path.join(HERE, "torch", "models.py") + ":make_gpt",
                    "-o", graph_path], check=True, capture_output=True)
    graph = ckptplan_torch.load_json(graph_path)

    sim = json.loads(ckptplan("simulate", graph_path, "--json"))
    peak, bound = sim["save_all_peak_bytes"], sim["lower_bound_bytes"]
    budget = bound + (peak - bound) // 3  # well below save-all: forces recompute
    ckptplan("plan", graph_path, "--budget", str(budget), "-o", plan_path)
    plan = ckptplan_torch.load_json(plan_path)
    recomputed = [d["tensor"] for d in plan["decisions"] if d["action"] == "recompute"]
    assert recomputed, "budget %d did not force recompute" % budget
    assert plan["predicted_peak_bytes"] <= budget
    predicted = ckptplan_torch.predicted_saved_bytes(plan, graph)
    save_all = {"format": "ckptplan.plan",
                "decisions": [dict(d, action="save") for d in plan["decisions"]]}
    all_bytes = ckptplan_torch.predicted_saved_bytes(save_all, graph)

    # The unplanned eager step.
    ref_model, ref_inputs = models.make_gpt(layers=2)
    eager_kept, ref_loss = ckptplan_torch.saved_bytes(
        lambda: ref_model(*ref_inputs),
        list(ref_model.parameters()) + list(ref_inputs))
    ref_loss.backward()

    # Route (a) on a fresh copy of the same model.
    planned_model, planned_inputs = models.make_gpt(layers=2)
    compiled = ckptplan_torch.compile_with_plan(planned_model, plan)
    compiled(*planned_inputs)  # traces and partitions; the measured call reuses it
    kept, loss = ckptplan_torch.saved_bytes(
        lambda: compiled(*planned_inputs),
        list(planned_model.parameters()) + list(planned_inputs))
    loss.backward()

    print("budget %d B, plan peak %d B, %d of %d candidates recomputed" %
          (budget, plan["predicted_peak_bytes"], len(recomputed), len(plan["decisions"])))
    print("saved for backward: eager %d B (graph says %d B); planned %d B measured, "
          "%d B predicted (%.2f%%)" % (eager_kept, all_bytes, kept, predicted,
                                       100.0 * (kept - predicted) / predicted))
    assert abs(kept - predicted) <= 0.05 * predicted, (kept, predicted)
    # The graph's candidates are what eager autograd saves.
    assert abs(eager_kept - all_bytes) <= 0.001 * all_bytes, (eager_kept, all_bytes)
    assert kept < eager_kept, "the plan kept no fewer bytes than eager"
    assert torch.equal(loss, ref_loss), (loss.item(), ref_loss.item())
    for (name, p), q in zip(planned_model.named_parameters(), ref_model.parameters()):
        assert p.grad is not None and torch.equal(p.grad, q.grad), name
    print("loss %.6f and %d gradients equal the unplanned model's" %
          (loss.item(), len(list(ref_model.parameters()))))

    # Route (b)'s keys (PyTorch 2.4+ runs them) agree with `ckptplan export --to pytorch-sac`.
    exported = json.loads(ckptplan("export", plan_path, "--to", "pytorch-sac"))
    policy = ckptplan_torch.sac_policy(plan, graph)
    assert ckptplan_torch.sac_policy_from_export(exported) == \
        {key: True for key, save in policy.items() if save}
    if not hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts"):
        print("route (b): policy keys agree with the export; not run (PyTorch %s < 2.4)" %
              torch.__version__)

    # Route (c): whole blocks the plan recomputes run under checkpoint.
    block_plan = dict(plan)
    block_plan["decisions"] = [
        dict(d, action="recompute" if _in_scope(graph, d["tensor"], "h.1") else "save")
        for d in plan["decisions"]]
    wrapped_model, wrapped_inputs = models.make_gpt(layers=2)
    scopes = ckptplan_torch.wrap_recomputed_modules(wrapped_model, block_plan, graph)
    assert scopes == ["h.1"], scopes
    wrapped_loss = wrapped_model(*wrapped_inputs)
    wrapped_loss.backward()
    assert torch.equal(wrapped_loss, ref_loss)
    for p, q in zip(wrapped_model.parameters(), ref_model.parameters()):
        assert torch.equal(p.grad, q.grad)
    print("route (c): wrapped %s; loss and gradients equal" % scopes)
    print("PASS")


def _in_scope(graph, tensor, scope):
    for node in graph["nodes"]:
        if tensor in node["outputs"] and node["phase"] == "forward":
            s = node.get("scope", "")
            return s == scope or s.startswith(scope + "/")
    return False


if __name__ == "__main__":
    main()
