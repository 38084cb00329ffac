#!/usr/bin/python3
"""Measured harness for ckptplan's per-rank predictions (docs/distributed.md).

Runs a small GPT (tests/torch/models.py make_gpt) with torch.distributed over
gloo on this CPU, one process per rank, and measures each rank's step-2 peak
at the allocator: torch.profiler with profile_memory=True records every CPU
allocation and free from before the model is built, so the running sum of the
events is the bytes live; its maximum inside step 2 is the step's peak. c10's
CPU memory reporting is switched on so frees on other threads (gloo's) are
recorded too. The prediction is `ckptplan simulate` of the one-device graph
that ckptplan_torch.export exports from the same model, with the layout
flags; ranks are compared as sorted lists (ckptplan groups equal ranks).

Configurations: DDP (bucket copy and gradient_as_bucket_view) and
ZeroRedundancyOptimizer (over DDP), at world sizes 2 and 4.

Usage: /usr/bin/python3 scripts/dist_harness.py BUILD/ckptplan [--markdown] [--world=N]
       [CONFIG ...]
Exits 1 when a rank is off by more than 1%, 77 when torch is missing.
"""
import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # ckptplan_torch.export
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, record_function
except ImportError:
    print("SKIP: PyTorch is not installed")
    sys.exit(77)

# The step measured (1-based). Step 2 is the first with Adam's state made.
MEASURED_STEP = int(os.environ.get("CKPTPLAN_HARNESS_STEP", "2"))

CONFIGS = {
    "ddp-copy": ["--grad-buckets", "copy"],
    "ddp-view": ["--grad-buckets", "view"],
    "zero1": ["--zero", "1", "--zero-partition", "params"],
}


def report_cpu_frees():
    """Sets c10's FLAGS_caffe2_report_cpu_memory_usage (frees on any thread)."""
    for name in ("libc10.so", "libc10.so.1.13"):
        try:
            lib = ctypes.CDLL(name)
            ctypes.c_bool.in_dll(lib, "_ZN3fLB36FLAGS_caffe2_report_cpu_memory_usageE").value = True
            return True
        except OSError:
            continue
        except ValueError:
            return False
    return False


def worker(rank, world, config, port, results):
    import models
    report_cpu_frees()
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, inputs = models.make_gpt()
        ddp = DDP(model, gradient_as_bucket_view=(config == "ddp-view"), bucket_cap_mb=25)
        if config == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                          lr=1e-3)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            loss = ddp(*inputs)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss

        for _ in range(MEASURED_STEP - 1):
            step()
        dist.barrier()
        with record_function("ckptplan_step2"):
            step()
        dist.barrier()
    peak, start = step_peak(prof)
    # What is live at the step's start besides the tensors we can name is
    # DDP's buckets (one copy of the gradients) and a little bookkeeping. More
    # means the profiler lost a free event (seen: one event fewer, a block of
    # all the parameters' bytes left "live"): the run is not a measurement.
    state = [t for s in opt_state(opt) for t in s.values() if isinstance(t, torch.Tensor)]
    named = unique_bytes(list(model.parameters()) + list(model.buffers()) + state +
                         list(inputs))
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    unnamed = (start or 0) - named
    results[rank] = (peak, unnamed <= param_bytes + (64 << 10), unnamed)
    dist.destroy_process_group()


def step_peak(prof, name="ckptplan_step2"):
    """(peak, live at start) of the window `name` in a memory profile: the
    running sum of every allocation and free, in time order."""
    events = prof.profiler.kineto_results.events()
    window = [e for e in events if e.name() == name][0]
    begin, end = window.start_us(), window.start_us() + window.duration_us()
    memory = sorted(((e.start_us(), e.nbytes()) for e in events if e.name() == "[memory]"),
                    key=lambda e: e[0])
    running = peak = 0
    start = None
    for ts, nbytes in memory:
        if ts > end:
            break
        if ts >= begin and start is None:
            start = running
        running += nbytes
        if ts >= begin:
            peak = max(peak, running)
    return peak, start


def opt_state(opt):
    inner = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer wraps the local one
    return list(inner.state.values())


def unique_bytes(tensors):
    from ckptplan_torch import export as export_torch
    seen = {}
    for t in tensors:
        if t is not None and t.numel() > 0:
            seen[export_torch.storage_key(t)] = export_torch.storage_bytes(t)
    return sum(seen.values())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(world, config, attempts=5):
    """Each rank's peak; reruns (up to `attempts`) when a rank lost a free event."""
    for attempt in range(attempts):
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(world, config, free_port(), results), nprocs=world, join=True)
        runs = [results[r] for r in range(world)]
        if all(valid for _, valid, _ in runs):
            return [peak for peak, _, _ in runs], attempt
        print("%s world %d: a rank's profile lost a free (%s unnamed bytes live at the step's "
              "start); rerunning" % (config, world, [u for _, _, u in runs]), file=sys.stderr)
    raise SystemExit("%s world %d: no valid profile in %d runs" % (config, world, attempts))


def predict(binary, graph, world, config):
    out = subprocess.run([binary, "simulate", graph, "--json", "--dp", str(world)] +
                         CONFIGS[config], check=True, capture_output=True, text=True).stdout
    peaks = []
    for rank in json.loads(out)["ranks"]:
        peaks += [rank["peak_bytes"]] * rank["count"]
    return peaks


def main():
    if os.environ.get("GLOG_minloglevel") != "2":
        # c10 logs every allocation once its memory reporting is on.
        os.environ["GLOG_minloglevel"] = "2"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    binary = sys.argv[1]
    only = [a for a in sys.argv[2:] if a in CONFIGS]
    worlds = [int(a[len("--world="):]) for a in sys.argv[2:] if a.startswith("--world=")]
    markdown = "--markdown" in sys.argv
    from ckptplan_torch import export as export_torch
    import models
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptplan_dist_") as tmp:
        graph = os.path.join(tmp, "gpt.json")
        model, inputs = models.make_gpt()
        export_torch.write_json(export_torch.export_graph(model, inputs, optimizer="adam"), graph)
        for world in worlds or (2, 4):
            for config in only or CONFIGS:
                measured, reruns = measure(world, config)
                predicted = predict(binary, graph, world, config)
                for m, p in zip(sorted(measured), sorted(predicted)):
                    error = 100.0 * (p - m) / m
                    ok = abs(error) <= 1.0
                    failures += not ok
                    rows.append((config, world, m, p, error, ok, reruns))
    if markdown:
        print("| configuration | world | measured B | predicted B | error | reruns |")
        print("|---|---|---|---|---|---|")
    for config, world, m, p, error, ok, reruns in rows:
        if markdown:
            print("| %s | %d | %d | %d | %+.3f%% | %d |" % (config, world, m, p, error, reruns))
        else:
            print("%-9s world %d: measured %d B, predicted %d B, %+.3f%% %s (reruns %d)" %
                  (config, world, m, p, error, "ok" if ok else "FAIL", reruns))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
