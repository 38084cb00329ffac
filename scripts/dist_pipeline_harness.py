#!/usr/bin/python3
"""Measured harness for ckptplan's pipeline stages (docs/distributed.md).

A hand-written pipeline of the small GPT (tests/torch/models.py make_gpt, one
layer per stage) over gloo, world sizes 2 and 4, one stage per process: stage
0 holds wte, wpe and h.0; stage s h.s; the last also ln_f, lm_head and the
loss. GPipe, 1F1B, and 1F1B with Megatron's deallocate_pipeline_outputs
(1f1b-free: an output's data is freed once its send completes) over M
microbatches (each the exported graph's batch), every microbatch's tokens (first stage) and targets (last) made before the
step; a stage keeps each output until that microbatch's backward has run.
Sends are isend; as Megatron's send_forward_recv_backward, a send is waited
for with the stage's next receive (or at once when none follows). The
interleaved schedule (2 virtual stages per rank: rank r holds layers r and
W + r) batches its sends with the next receives as Megatron's interleaved
schedule does (interleaved_step). Step 2's
peak per stage from the profiler's allocator events (scripts/dist_common.py);
the prediction is `ckptplan simulate --pp W --microbatches M --schedule S` of
the exported one-device graph of the same model.

Usage: /usr/bin/python3 scripts/dist_pipeline_harness.py BUILD/ckptplan [--markdown]
       [--world=N] [gpipe|1f1b|1f1b-free|interleaved] [--microbatches=M]
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common as dc  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.autograd import Variable  # noqa: E402


def schedule(name, stages, stage, m, chunks=1):
    """(kind, microbatch, chunk) per slot, as StageSchedule (dist/pipeline.h)."""
    if name == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if name != "interleaved":
        chunks = 1
    total = m * chunks

    def slot(kind, k):
        chunk = (k // stages) % chunks
        i = (k // (stages * chunks)) * stages + k % stages
        return (kind, i, chunk if kind == "F" else chunks - 1 - chunk)

    if name == "interleaved":
        warm = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    else:
        warm = min(stages - stage - 1, total)
    slots = [slot("F", k) for k in range(warm)]
    f, b = warm, 0
    while f < total:
        slots += [slot("F", f), slot("B", b)]
        f += 1
        b += 1
    return slots + [slot("B", k) for k in range(b, total)]


def worker(rank, world, config, port, results):
    sched, m, chunks, free_outputs = config
    import models
    dc.init_rank(rank, world, port)
    stages = world * chunks  # virtual stages; chunk c of this rank is c * world + rank
    with dc.memory_profile() as prof:
        # One layer per virtual stage; the embeddings on the first, the head
        # on the last.
        model, (idx, targets) = models.make_gpt(layers=stages)
        blocks = [model.h[c * world + rank] for c in range(chunks)]
        first, last = rank == 0, rank == world - 1
        wte, wpe = (model.wte, model.wpe) if first else (None, None)
        ln_f, lm_head = (model.ln_f, model.lm_head) if last else (None, None)
        mods = [mod for mod in [wte, wpe] + blocks + [ln_f, lm_head] if mod is not None]
        params = [p for mod in mods for p in mod.parameters()]
        del model, mods  # the other stages' parameters
        opt = torch.optim.Adam(params, lr=1e-3)
        b, t = idx.shape
        d = 64
        # Each microbatch's tokens on the first stage, its targets on the last.
        inputs = [idx.clone() if first else targets.clone() for _ in range(m)
                  if first or last]
        del idx, targets

        def receives(kind, chunk):
            vs = chunk * world + rank
            return vs > 0 if kind == "F" else vs < stages - 1

        def tag(kind, vs, i):  # of what virtual stage vs receives for microbatch i
            return 2 * (vs * m + i) + (kind == "B")

        def forward(held, i, c, x_in):
            """Chunk c's forward of microbatch i from x_in (None on the first
            virtual stage); the output is kept in `held` for its backward.
            Returns (what to send, to whom, the output), or None on the last."""
            vs = c * world + rank
            if vs == 0:
                pos = torch.arange(t)
                x = wte(inputs[i]) + wpe(pos)
                del pos
            else:
                x_in.requires_grad_()
                x = x_in
            x = blocks[c](x)
            if vs == stages - 1:
                x = lm_head(ln_f(x))
                x = F.cross_entropy(x.reshape(b * t, -1), inputs[i].reshape(b * t))
            held[(i, c)] = (x_in, x)  # the output is kept for its backward
            return None if vs == stages - 1 else (x.detach(), (vs + 1) % world, x)

        def backward(held, i, c, g):
            """Chunk c's backward of microbatch i from the output gradient g
            (None on the last virtual stage: the loss); returns the input's
            gradient to send, or None on the first."""
            vs = c * world + rank
            x_in, out = held.pop((i, c))
            if vs == stages - 1:
                out.backward()
            else:
                # As Megatron's custom_backward: the output's data may be
                # gone, so no shape check.
                Variable._execution_engine.run_backward((out,), (g,), False, False, (), True,
                                                        True)
            del out
            return x_in.grad if vs > 0 else None

        def step():
            slots = schedule(sched, world, rank, m, chunks)
            held = {}
            in_flight = []  # (send posted, output to free once it completes)

            def complete():
                for work, output in in_flight:
                    work.wait()
                    if output is not None:
                        # Megatron's deallocate_output_tensor: the data goes,
                        # the tensor (and its grad_fn) stays.
                        output.data = torch.empty((1,))
                in_flight.clear()

            def recv(src, kind, vs, i):
                # As Megatron's send_forward_recv_backward: the receive is
                # posted with the sends in flight and all are waited for.
                buf = torch.empty(b, t, d)
                work = dist.irecv(buf, src, tag=tag(kind, vs, i))
                complete()
                work.wait()
                return buf

            def send(tensor, dst, kind, vs, i, k, output=None):
                in_flight.append((dist.isend(tensor, dst, tag=tag(kind, vs, i)), output))
                if not any(receives(kd, c) for kd, _, c in slots[k + 1:]):
                    complete()  # no receive follows: Megatron's send_backward waits

            for k, (kind, i, c) in enumerate(slots):
                vs = c * world + rank
                if kind == "F":
                    x_in = recv((vs - 1) % world, "F", vs, i) if vs > 0 else None
                    out = forward(held, i, c, x_in)
                    del x_in
                    if out is not None:
                        send(out[0], out[1], "F", vs + 1, i, k, out[2] if free_outputs else None)
                    del out
                else:
                    g = recv((vs + 1) % world, "B", vs, i) if vs < stages - 1 else None
                    grad = backward(held, i, c, g)
                    del g
                    if grad is not None:
                        send(grad, (vs - 1) % world, "B", vs - 1, i, k)
                    del grad
            complete()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def recv_key(kind, i, c):
            """(source rank, tag) of what slot (kind, i, c) receives, or None."""
            vs = c * world + rank
            if kind == "F":
                return ((vs - 1) % world, tag("F", vs, i)) if vs > 0 else None
            return ((vs + 1) % world, tag("B", vs, i)) if vs < stages - 1 else None

        def interleaved_step():
            """Megatron's interleaved schedule as its p2p runs it: after each
            forward of the warm-up, each forward-backward pair of the steady
            state and each backward of the cool-down, one batch posts the
            receives for the next forward and backward with the sends of what
            was made, and waits for all of them (send_forward_recv_forward,
            send_forward_backward_recv_forward_backward,
            send_backward_recv_backward). Waiting for each send at the next
            receive alone deadlocks here: gloo completes a send only once the
            peer has posted its receive, which it posts one slot later."""
            slots = schedule(sched, world, rank, m, chunks)
            fs = [s for s in slots if s[0] == "F"]
            bs = [s for s in slots if s[0] == "B"]
            total = len(fs)
            warm = min((world - rank - 1) * 2 + (chunks - 1) * world, total)
            held, inbox = {}, {}

            def exchange(sends, slots_to_receive):
                works = []
                for slot in slots_to_receive:
                    key = recv_key(*slot) if slot is not None else None
                    if key is None:
                        continue
                    buf = torch.empty(b, t, d)
                    inbox[slot] = buf
                    works.append(dist.irecv(buf, key[0], tag=key[1]))
                    del buf
                for send in sends:
                    if send is not None:
                        works.append(dist.isend(send[0], send[1], tag=send[2]))
                for work in works:
                    work.wait()

            def run_forward(slot):
                _, i, c = slot
                out = forward(held, i, c, inbox.pop(slot, None))
                return None if out is None else (out[0], out[1], tag("F", c * world + rank + 1, i))

            def run_backward(slot):
                _, i, c = slot
                grad = backward(held, i, c, inbox.pop(slot, None))
                vs = c * world + rank
                return None if grad is None else (grad, (vs - 1) % world, tag("B", vs - 1, i))

            exchange([], [fs[0]])
            for k in range(warm):
                receive = [fs[k + 1] if k + 1 < total else None]
                if k == warm - 1 and warm < total:
                    receive.append(bs[0])
                exchange([run_forward(fs[k])], receive)
            for j in range(total - warm):
                sent_f = run_forward(fs[warm + j])
                sent_b = run_backward(bs[j])
                exchange([sent_f, sent_b], [fs[warm + j + 1] if warm + j + 1 < total else None,
                                            bs[j + 1] if j + 1 < total else None])
                del sent_f, sent_b
            if warm == total:
                exchange([], [bs[0]])
            for k in range(total - warm, total):
                exchange([run_backward(bs[k])], [bs[k + 1] if k + 1 < total else None])
            opt.step()
            opt.zero_grad(set_to_none=True)

        dc.run_steps(interleaved_step if sched == "interleaved" else step)
    peak, _ = dc.step_peak(prof)
    # No check of what is live at the step's start: in-flight receive
    # buffers and held outputs are not tensors this process can name.
    results[rank] = (peak, True, None)
    dist.destroy_process_group()


# (schedule, virtual stages, --pp-free-outputs).
CONFIGS = {
    "gpipe": ("gpipe", 1, False),
    "1f1b": ("1f1b", 1, False),
    "1f1b-free": ("1f1b", 1, True),
    "interleaved": ("interleaved", 2, False),
}


def main():
    dc.quiet_c10()
    args = dc.Args(sys.argv, CONFIGS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptplan_pp_") as tmp:
        for world in args.worlds or (2, 4):
            for name in args.configs:
                sched, chunks, free = CONFIGS[name]
                graph = os.path.join(tmp, "gpt%d.json" % (world * chunks))
                if not os.path.exists(graph):
                    dc.export_gpt(graph, layers=world * chunks)
                for m in args.microbatches or (4, 8):
                    measured, _ = dc.measure(worker, world, (sched, m, chunks, free))
                    flags = ["--pp", str(world), "--microbatches", str(m), "--schedule", sched]
                    if chunks > 1:
                        flags += ["--virtual-stages", str(chunks)]
                    if free:
                        flags.append("--pp-free-outputs")
                    predicted = {r["pp_stage"]: r["peak_bytes"]
                                 for r in dc.simulate(args.binary, graph, flags)}
                    for stage in range(world):
                        meas, pred = measured[stage], predicted[stage]
                        rows.append((world, name, m, stage, meas, pred,
                                     100.0 * (pred - meas) / meas))
    if args.markdown:
        print("| world | schedule | microbatches | stage | measured B | predicted B | error |")
        print("|---|---|---|---|---|---|---|")
    for world, name, m, stage, meas, pred, err in rows:
        if args.markdown:
            print("| %d | %s | %d | %d | %d | %d | %+.3f%% |" %
                  (world, name, m, stage, meas, pred, err))
        else:
            print("world %d %-11s m=%d stage %d: measured %d B, predicted %d B, %+.3f%%" %
                  (world, name, m, stage, meas, pred, err))
    sys.exit(0 if all(abs(r[6]) <= 1.0 for r in rows) else 1)


if __name__ == "__main__":
    main()
