#!/usr/bin/python3
"""Measured harness for ckptplan's pipeline stages (docs/distributed.md).

A hand-written pipeline of the small GPT (tests/torch/models.py make_gpt, 2
layers) over gloo, world size 2, one stage per process: stage 0 holds wte,
wpe and h.0; stage 1 h.1, ln_f, lm_head and the loss. GPipe or 1F1B over M
microbatches (each the exported graph's batch), every microbatch's inputs
made before the step; a stage keeps each sent activation until that
microbatch's backward has run. Step 2's peak per stage from the profiler's
allocator events, as in dist_harness.py; the prediction is `ckptplan simulate
--pp 2 --microbatches M --schedule S` of the exported one-device graph.

Usage: /usr/bin/python3 scripts/dist_pipeline_harness.py BUILD/ckptplan [--markdown]
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

import dist_harness  # noqa: E402


def schedule(name, stages, stage, m):
    if name == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(stages - stage - 1, m)
    slots = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        slots += [("F", f), ("B", b)]
        f += 1
        b += 1
    return slots + [("B", i) for i in range(b, m)]


def worker(rank, world, sched, m, port, results):
    import models
    dist_harness.report_cpu_frees()
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, (idx, targets) = models.make_gpt()
        if rank == 0:
            mods = [model.wte, model.wpe, model.h[0]]
        else:
            mods = [model.h[1], model.ln_f, model.lm_head]
        params = [p for mod in mods for p in mod.parameters()]
        # Drop the other stage's parameters (keep this stage's modules by name).
        if rank == 0:
            wte, wpe, h = mods
        else:
            h, ln_f, lm_head = mods
        del model, mods
        opt = torch.optim.Adam(params, lr=1e-3)
        b, t = idx.shape
        d = 64
        inputs = [idx.clone() if rank == 0 else targets.clone() for _ in range(m)]
        del idx, targets

        def step():
            held = {}
            works = []  # sends in flight: blocking sends would deadlock 1F1B
            for kind, i in schedule(sched, world, rank, m):
                if kind == "F" and rank == 0:
                    pos = torch.arange(t)
                    x = wte(inputs[i]) + wpe(pos)
                    del pos
                    x = h(x)
                    works.append(dist.isend(x.detach(), 1))
                    held[i] = x
                elif kind == "F":
                    x_in = torch.empty(b, t, d)
                    dist.recv(x_in, 0)
                    x_in.requires_grad_()
                    y = lm_head(ln_f(h(x_in)))
                    loss = F.cross_entropy(y.reshape(b * t, -1), inputs[i].reshape(b * t))
                    del y
                    held[i] = (x_in, loss)
                elif rank == 0:
                    g = torch.empty(b, t, d)
                    dist.recv(g, 1)
                    x = held.pop(i)
                    x.backward(g)
                    del x, g
                else:
                    x_in, loss = held.pop(i)
                    loss.backward()
                    works.append(dist.isend(x_in.grad, 0))
                    del x_in, loss
            for work in works:
                work.wait()
            del works
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()
        dist.barrier()
        with record_function("ckptplan_step2"):
            step()
        dist.barrier()
    peak, _ = dist_harness.step_peak(prof)
    results[rank] = peak
    dist.destroy_process_group()


def main():
    if os.environ.get("GLOG_minloglevel") != "2":
        os.environ["GLOG_minloglevel"] = "2"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    binary = sys.argv[1]
    markdown = "--markdown" in sys.argv
    import export_torch
    import models
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptplan_pp_") as tmp:
        graph = os.path.join(tmp, "gpt.json")
        model, inputs = models.make_gpt()
        export_torch.write_json(export_torch.export_graph(model, inputs, optimizer="adam"), graph)
        for sched in ("gpipe", "1f1b"):
            for m in (4, 8):
                manager = mp.Manager()
                results = manager.dict()
                mp.spawn(worker, args=(2, sched, m, dist_harness.free_port(), results), nprocs=2,
                         join=True)
                out = subprocess.run([binary, "simulate", graph, "--json", "--pp", "2",
                                      "--microbatches", str(m), "--schedule", sched],
                                     check=True, capture_output=True, text=True).stdout
                predicted = {r["pp_stage"]: r["peak_bytes"] for r in json.loads(out)["ranks"]}
                for stage in (0, 1):
                    meas, pred = results[stage], predicted[stage]
                    rows.append((sched, m, stage, meas, pred, 100.0 * (pred - meas) / meas))
    if markdown:
        print("| schedule | microbatches | stage | measured B | predicted B | error |")
        print("|---|---|---|---|---|---|")
    for sched, m, stage, meas, pred, err in rows:
        if markdown:
            print("| %s | %d | %d | %d | %d | %+.3f%% |" % (sched, m, stage, meas, pred, err))
        else:
            print("%-5s m=%d stage %d: measured %d B, predicted %d B, %+.3f%%" %
                  (sched, m, stage, meas, pred, err))
    sys.exit(0 if all(abs(r[5]) <= 1.0 for r in rows) else 1)


if __name__ == "__main__":
    main()
