#!/usr/bin/python3
"""`ckptplan simulate` of an exported graph reproduces, within 0.1%, the peak
live tensor bytes of the same eager CPU training step (MLP and GPT-style
decoder, Adam; the decoder with tied embedding weights; a conv net with
BatchNorm, whose convolution and BatchNorm kernels allocate scratch inside
the op: the exporter's `workspace_bytes`, without which the simulated peak
is 1.08% low).

The eager peak is measured at the allocator: torch.profiler with
profile_memory=True records every CPU allocation and free of the step, in
order; their running sum's maximum is the most bytes the step itself had
allocated at once. Added to it are the bytes already live when the step
starts: the unique storages of the parameters, Adam's state (made by a
warm-up step, as in every step after the first) and the input batch.

Usage: torch_eager_peak_test.py CKPTPLAN_BINARY. Exits 77 (skipped) when
PyTorch is not installed."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "torch"))
import torch_test_util  # noqa: E402,F401  (exits 77 without torch)
import torch  # noqa: E402
from ckptplan_torch import export, measure  # noqa: E402
import models  # noqa: E402


def eager_peak(factory):
    model, inputs = factory()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(*inputs).backward()
    opt.step()  # warm-up: makes Adam's state
    opt.zero_grad(set_to_none=True)
    resident = measure.resident_bytes(model, opt, inputs)

    def step():
        loss = model(*inputs)
        loss.backward()
        opt.step()
        del loss

    return measure.step_peak(step, torch.device("cpu"), resident), resident


def check_schema(graph):
    try:
        import jsonschema
    except ImportError:
        return
    with open(os.path.join(HERE, "..", "schemas", "graph.schema.json")) as f:
        jsonschema.validate(graph, json.load(f))


def simulated_peak(binary, factory, path):
    model, inputs = factory()
    graph = export.export_graph(model, inputs, optimizer="adam")
    check_schema(graph)
    if any(n["op"] == "aten.convolution_backward.default" for n in graph["nodes"]):
        assert any(n.get("workspace_bytes", 0) > 0 for n in graph["nodes"]
                   if n["op"] == "aten.convolution_backward.default"), "no workspace recorded"
    export.write_json(graph, path)
    out = subprocess.run([binary, "simulate", path, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["peak_bytes"]


def main():
    with tempfile.TemporaryDirectory(prefix="ckptplan_eager_") as tmp:
        run(tmp)


def run(tmp):
    binary = sys.argv[1]
    failures = 0
    for name, factory in (("mlp", models.make_mlp), ("gpt", models.make_gpt),
                          ("gpt-tied", models.make_gpt_tied), ("convnet", models.make_convnet)):
        measured, resident = eager_peak(factory)
        simulated = simulated_peak(binary, factory, os.path.join(tmp, name + ".json"))
        error = 100.0 * (simulated - measured) / measured
        ok = abs(simulated - measured) <= 0.001 * measured
        failures += not ok
        print("%s: eager peak %d B (resident %d B), ckptplan simulate %d B, %+.4f%% %s" %
              (name, measured, resident, simulated, error, "ok" if ok else "FAIL"))
    if failures:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
