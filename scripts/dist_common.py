"""What the measured distributed harnesses share (scripts/dist_harness.py,
dist_tp_harness.py, dist_pipeline_harness.py; docs/distributed.md).

Each harness runs a model with torch.distributed over gloo on this CPU, one
process per rank, and measures each rank's step-2 peak at the allocator:
torch.profiler with profile_memory=True records every CPU allocation and free
from before the model is built, so the running sum of the events is the bytes
live; its maximum inside step 2 is the step's peak. c10's CPU memory
reporting is switched on so frees on other threads (gloo's) are recorded too.
The prediction is `ckptplan simulate --json` of the one-device graph that
ckptplan_torch.export exports from the same model, with the layout flags.

Importing this module puts tests/torch (models.py) and python/ (ckptplan_torch)
on the path, and exits 77 when torch is missing.
"""
import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # ckptplan_torch
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.profiler import ProfilerActivity, profile, record_function
except ImportError:
    print("SKIP: PyTorch is not installed")
    sys.exit(77)

# The step measured (1-based). Step 2 is the first with Adam's state made.
MEASURED_STEP = int(os.environ.get("CKPTPLAN_HARNESS_STEP", "2"))
WINDOW = "ckptplan_step2"  # the profiler range around the measured step

# Bookkeeping a rank may hold at the step's start beyond the tensors we can
# name (bytes); more means the profile lost a free event.
BOOKKEEPING = 64 << 10


def quiet_c10():
    """Re-executes the harness with GLOG_minloglevel=2: c10 logs every
    allocation once its memory reporting is on."""
    if os.environ.get("GLOG_minloglevel") != "2":
        os.environ["GLOG_minloglevel"] = "2"
        os.execv(sys.executable, [sys.executable] + sys.argv)


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


def init_rank(rank, world, port):
    """A spawned rank's start: frees reported, one thread, gloo joined."""
    report_cpu_frees()
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def memory_profile():
    """The profiler every rank runs from before its model is built."""
    return profile(activities=[ProfilerActivity.CPU], profile_memory=True)


def training_step(model, opt, inputs):
    """One training step of `model` (its forward returns the loss): forward,
    backward, optimizer step, gradients dropped."""
    def step():
        loss = model(*inputs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    return step


def run_steps(step):
    """MEASURED_STEP - 1 steps, then the measured one inside WINDOW, each
    rank starting and ending it together."""
    for _ in range(MEASURED_STEP - 1):
        step()
    dist.barrier()
    with record_function(WINDOW):
        step()
    dist.barrier()


def step_peak(prof, name=WINDOW):
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


def unnamed_at_start(start, model, opt, inputs):
    """Bytes live at the step's start (`start`, from step_peak) beyond the
    unique storages of the parameters, buffers, optimizer state and inputs."""
    from ckptplan_torch.measure import unique_bytes
    state = [t for s in opt_state(opt) for t in s.values() if isinstance(t, torch.Tensor)]
    named = unique_bytes(list(model.parameters()) + list(model.buffers()) + state +
                         list(inputs))
    return (start or 0) - named


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(worker, world, config, attempts=5):
    """Each rank's peak and the reruns it took. `worker(rank, world, config,
    port, results)` runs in a process per rank and sets results[rank] to
    (peak, valid, unnamed bytes); a run with an invalid rank (a lost free
    event) is repeated, up to `attempts` runs."""
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


def simulate(binary, graph, flags):
    """The "ranks" of `ckptplan simulate GRAPH --json FLAGS`."""
    out = subprocess.run([binary, "simulate", graph, "--json"] + flags,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ranks"]


def rank_peaks(ranks):
    """One peak per rank, in rank order (simulate groups equal ranks)."""
    peaks = []
    for rank in ranks:
        peaks += [rank["peak_bytes"]] * rank["count"]
    return peaks


def export_gpt(path, layers=None):
    """Writes the one-device graph of models.make_gpt (with Adam) to `path`."""
    from ckptplan_torch import export as export_torch
    import models
    model, inputs = models.make_gpt() if layers is None else models.make_gpt(layers=layers)
    export_torch.write_json(export_torch.export_graph(model, inputs, optimizer="adam"), path)


class Args:
    """The harnesses' command line: BUILD/ckptplan [--markdown] [--world=N ...]
    [CONFIG ...] [--microbatches=M ...]."""
    def __init__(self, argv, configs):
        self.binary = argv[1]
        rest = argv[2:]
        self.markdown = "--markdown" in rest
        self.worlds = [int(a[len("--world="):]) for a in rest if a.startswith("--world=")]
        self.configs = [a for a in rest if a in configs] or list(configs)
        self.microbatches = [int(a[len("--microbatches="):]) for a in rest
                             if a.startswith("--microbatches=")]


def run_layouts(configs, worker, layout_flags, by_rank, width, prefix):
    """The data- and tensor-parallel harnesses' main: for each world size and
    configuration, measure every rank, simulate with `layout_flags(world,
    config)`, and print one row per rank (`by_rank`: rank i against
    predicted rank i; otherwise both sorted, as ckptplan groups equal ranks).
    Exits 1 when a rank is off by more than 1%."""
    quiet_c10()
    args = Args(sys.argv, configs)
    rows = []
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        graph = os.path.join(tmp, "gpt.json")
        export_gpt(graph)
        for world in args.worlds or (2, 4):
            for config in args.configs:
                measured, reruns = measure(worker, world, config)
                predicted = rank_peaks(simulate(args.binary, graph, layout_flags(world, config)))
                if not by_rank:
                    measured, predicted = sorted(measured), sorted(predicted)
                for rank, (m, p) in enumerate(zip(measured, predicted)):
                    error = 100.0 * (p - m) / m
                    rows.append((config, world, rank if by_rank else None, m, p, error,
                                 abs(error) <= 1.0, reruns))
    print_rows(rows, by_rank, width, args.markdown)
    sys.exit(0 if all(row[6] for row in rows) else 1)


def print_rows(rows, by_rank, width, markdown):
    if markdown:
        rank_head, rank_rule = ("| rank ", "|---") if by_rank else ("", "")
        print("| configuration | world %s| measured B | predicted B | error | reruns |" % rank_head)
        print("|---|---%s|---|---|---|---|" % rank_rule)
    for config, world, rank, m, p, error, ok, reruns in rows:
        if markdown:
            rank_cell = "%d | " % rank if by_rank else ""
            print("| %s | %d | %s%d | %d | %+.3f%% | %d |" % (config, world, rank_cell, m, p,
                                                             error, reruns))
        else:
            where = "world %d rank %d" % (world, rank) if by_rank else "world %d" % world
            print("%-*s %s: measured %d B, predicted %d B, %+.3f%% %s (reruns %d)" %
                  (width, config, where, m, p, error, "ok" if ok else "FAIL", reruns))
