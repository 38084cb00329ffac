#!/usr/bin/python3
"""ONNX fidelity harness: ckptplan's predicted peak of an ONNX model against
the measured peak of one eager Adam training step (torch, CPU, fp32).

For each model: export it to ONNX (opset 17, training mode, no constant
folding), run `ckptplan simulate model.onnx --dim ... --optimizer adam --json
--timeline`, and measure one eager step (forward, backward, Adam step) at the
allocator with torch.profiler (profile_memory=True), after a warm-up step
that makes Adam's state, as tests/torch_eager_peak_test.py does. Prints the
predicted and measured peak of the step and of each phase (forward,
backward, optimizer), and the saved-activation bytes (measured with
saved_tensors_hooks: unique storages autograd saves, less parameters,
buffers and inputs; predicted: saved activations at the first backward step).

Usage: scripts/fidelity_onnx.py [--ckptplan build/ckptplan] [--only NAME,...]
Exits 1 when a model misses its target (docs/onnx-fidelity.md)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from ckptplan_torch import export as export_torch  # noqa: E402
from ckptplan_torch.measure import unique_bytes  # noqa: E402
import models  # noqa: E402

PHASES = ("forward", "backward", "optimizer")


# ---- models: (module, example inputs, dims for ckptplan, --loss, target %) ----

class WithLoss(nn.Module):
    """Cross-entropy over the last dim of the wrapped model's logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        logits = self.model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    def __init__(self, c=8, classes=4):
        super().__init__()
        self.enc1 = conv_block(3, c)
        self.enc2 = conv_block(c, 2 * c)
        self.pool = nn.MaxPool2d(2)
        self.mid = conv_block(2 * c, 2 * c)
        self.up2 = nn.ConvTranspose2d(2 * c, 2 * c, 2, stride=2)
        self.dec2 = conv_block(4 * c, c)
        self.up1 = nn.ConvTranspose2d(c, c, 2, stride=2)
        self.dec1 = conv_block(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1).permute(0, 2, 3, 1)


class Encoder(nn.Module):
    def __init__(self, d=32, classes=10, dropout=0.0):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(x))


class Recurrent(nn.Module):
    def __init__(self, cell, d_in=16, hidden=32, classes=10):
        super().__init__()
        self.rnn = cell(d_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def build_models():
    """name -> (factory returning (model, inputs), dims, loss flag, target %)."""
    def seeded(make):
        def factory():
            torch.manual_seed(0)
            return make()
        return factory

    def vit():
        import torchvision
        model = torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
            mlp_dim=64, num_classes=10)
        return model, (torch.randn(4, 3, 32, 32),)

    return {
        "mlp": (seeded(lambda: models.make_mlp(32)), {}, None, 0.1),
        "gpt-tied": (seeded(lambda: models.make_gpt_tied(4, 2)), {}, None, 0.1),
        "vit": (seeded(vit), {}, "cross-entropy", 0.1),
        "encoder": (seeded(lambda: (WithLoss(Encoder()), (torch.randn(4, 16, 32),
                                                          torch.randint(0, 10, (4, 16))))),
                    {}, None, 0.1),
        "cnn-bn": (seeded(lambda: (WithLoss(CNN()), (torch.randn(4, 3, 32, 32),
                                                     torch.randint(0, 10, (4,))))),
                   {}, None, 2.0),
        "unet": (seeded(lambda: (WithLoss(UNet()), (torch.randn(2, 3, 32, 32),
                                                    torch.randint(0, 4, (2, 32, 32))))),
                 {}, None, 2.0),
        "lstm": (seeded(lambda: (WithLoss(Recurrent(nn.LSTM)), (torch.randn(4, 12, 16),
                                                                torch.randint(0, 10, (4, 12))))),
                 {}, None, 1.0),
        "gru": (seeded(lambda: (WithLoss(Recurrent(nn.GRU)), (torch.randn(4, 12, 16),
                                                              torch.randint(0, 10, (4, 12))))),
                {}, None, 1.0),
    }


# ---- measuring the eager step ----

def loss_targets(model, inputs, loss_flag):
    """The int64 targets `--loss cross-entropy` adds as a graph input (resident
    like the batch); None for other losses."""
    if loss_flag != "cross-entropy":
        return None
    with torch.no_grad():
        out = model(*inputs)
    return torch.zeros(out.shape[:-1], dtype=torch.int64)


def loss_of(model, inputs, loss_flag, targets):
    out = model(*inputs)
    if loss_flag == "cross-entropy":
        # What `--loss cross-entropy` appends: over the last dim, integer targets.
        out = F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
    elif loss_flag == "mean":
        out = out.mean()
    return out


def measured_step(factory, loss_flag):
    """(step peak, per-phase peaks, resident bytes) of the second Adam step."""
    model, inputs = factory()
    model.train()
    targets = loss_targets(model, inputs, loss_flag)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_of(model, inputs, loss_flag, targets).backward()
    opt.step()  # warm-up: makes Adam's state, as every step after the first has
    opt.zero_grad(set_to_none=True)
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    resident = unique_bytes(list(model.parameters()) + list(model.buffers()) + state +
                            list(inputs) + [targets])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("phase:forward"):
            loss = loss_of(model, inputs, loss_flag, targets)
        with record_function("phase:backward"):
            loss.backward()
        with record_function("phase:optimizer"):
            opt.step()
        del loss
    events = list(prof.profiler.kineto_results.events())
    spans = []
    for e in events:
        if e.name().startswith("phase:"):
            spans.append((e.start_us(), e.start_us() + e.duration_us(), e.name()[6:]))
    spans.sort()
    memory = sorted(((e.start_us(), e.nbytes()) for e in events if e.name() == "[memory]"),
                    key=lambda m: m[0])
    running = 0
    peaks = {p: None for p in PHASES}
    step_peak = 0
    for ts, nbytes in memory:
        running += nbytes
        step_peak = max(step_peak, running)
        phase = next((name for lo, hi, name in spans if lo <= ts <= hi), None)
        if phase is not None:
            peaks[phase] = max(peaks[phase] or 0, running)
    return resident + step_peak, {p: resident + (v or 0) for p, v in peaks.items()}, resident


def measured_saved(factory, loss_flag):
    model, inputs = factory()
    model.train()
    targets = loss_targets(model, inputs, loss_flag)
    resident = {export_torch.storage_key(t) for t in
                list(model.parameters()) + list(model.buffers()) + list(inputs) + [targets]
                if t is not None}
    saved = {}

    def pack(t):
        key = export_torch.storage_key(t)
        if key not in resident and export_torch.storage_bytes(t) > 0:
            saved[key] = export_torch.storage_bytes(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model, inputs, loss_flag, targets)
    loss.backward()
    return sum(saved.values())


# ---- predicting with ckptplan ----

def export(factory, path):
    model, inputs = factory()
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


def predicted(binary, path, dims, loss_flag, tmp):
    timeline = os.path.join(tmp, "timeline.json")
    cmd = [binary, "simulate", path, "--optimizer", "adam", "--device", "cpu", "--json",
           "--timeline", timeline]
    for k, v in dims.items():
        cmd += ["--dim", "%s=%d" % (k, v)]
    if loss_flag:
        cmd += ["--loss", loss_flag]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), run.stderr))
    summary = json.loads(run.stdout)
    with open(timeline) as f:
        steps = json.load(f)["steps"]
    peaks = {p: max((s["total_bytes"] for s in steps if s["phase"] == p), default=None)
             for p in PHASES}
    first_backward = next(s for s in steps if s["phase"] != "forward")
    saved = first_backward["bytes"]["saved_activations"]
    return summary["peak_bytes"], peaks, saved, run.stderr, steps


def percent(pred, meas):
    return 100.0 * (pred - meas) / meas if meas else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckptplan", default=os.path.join(HERE, "..", "build", "ckptplan"))
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--timeline", action="store_true",
                        help="print each model's predicted timeline")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = build_models()
    names = [n for n in table if not args.only or n in args.only.split(",")]
    print("| model | step predicted | step measured | error | forward | backward | optimizer "
          "| saved predicted | saved measured | saved error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ckptplan_fidelity_") as tmp:
        for name in names:
            factory, dims, loss_flag, target = table[name]
            path = os.path.join(tmp, name + ".onnx")
            export(factory, path)
            pred, pred_phase, pred_saved, log, steps = predicted(args.ckptplan, path, dims,
                                                                 loss_flag, tmp)
            meas, meas_phase, _ = measured_step(factory, loss_flag)
            meas_saved = measured_saved(factory, loss_flag)
            err = percent(pred, meas)
            saved_err = percent(pred_saved, meas_saved)
            ok = abs(err) <= target and abs(saved_err) <= 1.0
            failures += not ok
            phase_cells = ["%+.2f%%" % percent(pred_phase[p], meas_phase[p])
                           if pred_phase[p] is not None else "-" for p in PHASES]
            print("| %s | %d | %d | %+.3f%% | %s | %d | %d | %+.2f%% |%s" % (
                name, pred, meas, err, " | ".join(phase_cells), pred_saved, meas_saved,
                saved_err, "" if ok else " MISS (target %.1f%%)" % target))
            for p in PHASES:
                print("|   %s | %s | %d | | | | | | | |" % (p, pred_phase[p], meas_phase[p]))
            for line in log.splitlines():
                if "warn" in line:
                    print("    ckptplan: " + line.strip())
            if args.timeline:
                for s in steps:
                    print("    %4d %-10s %-40s %10d %s" % (s["step"], s["phase"], s["node"][:40],
                                                          s["total_bytes"], s["bytes"]))
            sys.stdout.flush()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
