#!/usr/bin/python3
"""Measured harness for ckptplan's pipeline stages (docs/distributed.md).

A hand-written pipeline of the small GPT (tests/torch/models.py make_gpt, one
layer per stage) over gloo, world sizes 2 and 4, one stage per process: stage
0 holds wte, wpe and h.0; stage s h.s; the last also ln_f, lm_head and the
loss. GPipe or 1F1B over M microbatches (each the exported graph's batch),
every microbatch's tokens (first stage) and targets (last) made before the
step; a stage keeps each output until that microbatch's backward has run.
Sends are isend; as Megatron's send_forward_recv_backward, a send is waited
for with the stage's next receive (or at once when none follows). Step 2's
peak per stage from the profiler's allocator events, as in dist_harness.py;
the prediction is `ckptplan simulate --pp W --microbatches M --schedule S` of
the exported one-device graph of the same model.

Usage: /usr/bin/python3 scripts/dist_pipeline_harness.py BUILD/ckptplan [--markdown]
       [--world=N] [gpipe|1f1b] [--microbatches=M]
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
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


def receives(stage, world, kind):
    """Whether a slot of `kind` receives: forwards after the first stage,
    backwards before the last."""
    return stage > 0 if kind == "F" else stage < world - 1


def worker(rank, world, sched, m, port, results):
    import models
    dist_harness.report_cpu_frees()
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    first, last = rank == 0, rank == world - 1
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        # One layer per stage; the embeddings on the first, the head on the last.
        model, (idx, targets) = models.make_gpt(layers=world)
        block = model.h[rank]
        wte, wpe = (model.wte, model.wpe) if first else (None, None)
        ln_f, lm_head = (model.ln_f, model.lm_head) if last else (None, None)
        mods = [mod for mod in (wte, wpe, block, ln_f, lm_head) if mod is not None]
        params = [p for mod in mods for p in mod.parameters()]
        del model, mods  # the other stages' parameters
        opt = torch.optim.Adam(params, lr=1e-3)
        b, t = idx.shape
        d = 64
        # Each microbatch's tokens on the first stage, its targets on the last.
        inputs = [idx.clone() if first else targets.clone() for _ in range(m)
                  if first or last]
        del idx, targets

        def step():
            slots = schedule(sched, world, rank, m)
            held = {}
            in_flight = []  # sends posted, not yet waited for

            def recv(src):
                # As Megatron's send_forward_recv_backward: the receive is
                # posted with the sends in flight and all are waited for.
                buf = torch.empty(b, t, d)
                work = dist.irecv(buf, src)
                for send in in_flight:
                    send.wait()
                in_flight.clear()
                work.wait()
                return buf

            def send(tensor, dst, k):
                work = dist.isend(tensor, dst)
                if any(receives(rank, world, kind) for kind, _ in slots[k + 1:]):
                    in_flight.append(work)
                else:
                    work.wait()  # no receive follows: Megatron's send_backward waits

            for k, (kind, i) in enumerate(slots):
                if kind == "F":
                    x_in = None
                    if first:
                        pos = torch.arange(t)
                        x = wte(inputs[i]) + wpe(pos)
                        del pos
                    else:
                        x_in = recv(rank - 1)
                        x_in.requires_grad_()
                        x = x_in
                    x = block(x)
                    if last:
                        x = lm_head(ln_f(x))
                        x = F.cross_entropy(x.reshape(b * t, -1), inputs[i].reshape(b * t))
                    else:
                        send(x.detach(), rank + 1, k)
                    held[i] = (x_in, x)  # the output is kept for its backward
                    del x_in, x
                else:
                    x_in, out = held.pop(i)
                    if last:
                        out.backward()
                    else:
                        g = recv(rank + 1)
                        out.backward(g)
                        del g
                    del out
                    if not first:
                        send(x_in.grad, rank - 1, k)
                    del x_in
            for work in in_flight:
                work.wait()
            del in_flight
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
    worlds = [int(a[len("--world="):]) for a in sys.argv[2:] if a.startswith("--world=")]
    scheds = [a for a in sys.argv[2:] if a in ("gpipe", "1f1b")]
    counts = [int(a[len("--microbatches="):]) for a in sys.argv[2:]
              if a.startswith("--microbatches=")]
    from ckptplan_torch import export as export_torch
    import models
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptplan_pp_") as tmp:
        for world in worlds or (2, 4):
            graph = os.path.join(tmp, "gpt%d.json" % world)
            model, inputs = models.make_gpt(layers=world)
            export_torch.write_json(export_torch.export_graph(model, inputs, optimizer="adam"),
                                    graph)
            for sched in scheds or ("gpipe", "1f1b"):
                for m in counts or (4, 8):
                    manager = mp.Manager()
                    results = manager.dict()
                    mp.spawn(worker, args=(world, sched, m, dist_harness.free_port(), results),
                             nprocs=world, join=True)
                    out = subprocess.run([binary, "simulate", graph, "--json", "--pp", str(world),
                                          "--microbatches", str(m), "--schedule", sched],
                                         check=True, capture_output=True, text=True).stdout
                    predicted = {r["pp_stage"]: r["peak_bytes"]
                                 for r in json.loads(out)["ranks"]}
                    for stage in range(world):
                        meas, pred = results[stage], predicted[stage]
                        rows.append((world, sched, m, stage, meas, pred,
                                     100.0 * (pred - meas) / meas))
    if markdown:
        print("| world | schedule | microbatches | stage | measured B | predicted B | error |")
        print("|---|---|---|---|---|---|---|")
    for world, sched, m, stage, meas, pred, err in rows:
        if markdown:
            print("| %d | %s | %d | %d | %d | %d | %+.3f%% |" %
                  (world, sched, m, stage, meas, pred, err))
        else:
            print("world %d %-5s m=%d stage %d: measured %d B, predicted %d B, %+.3f%%" %
                  (world, sched, m, stage, meas, pred, err))
    sys.exit(0 if all(abs(r[6]) <= 1.0 for r in rows) else 1)


if __name__ == "__main__":
    main()
