"""Measures an applied plan against its prediction and the unplanned step.

The peak of a training step (forward, backward, optimizer step) is measured
at the allocator. On CPU: torch.profiler with profile_memory=True records
every allocation and free of the step in order; the most their running sum
reaches, plus the bytes live when the step starts (the unique storages of
the parameters, buffers, optimizer state and input batch), is the step's
peak. On CUDA: torch.cuda.max_memory_allocated() over the step. Both count
what the step really allocated, never what a forward kept at its end.

The gradient check runs the unplanned eager step on a copy of the same model
from the same state and random seed, and compares the loss, every gradient,
every parameter after the optimizer step and every buffer bit for bit; for a
plan with approximate recompute, the loss and buffers bit for bit and the
gradients by their relative error.
"""

import copy
import statistics
import time

import torch

from . import approx, export
from .apply import apply_plan, exact_plan, load_plan


def unique_bytes(tensors):
    seen = {}
    for t in tensors:
        if t is not None and t.numel() > 0:
            seen[export.storage_key(t)] = export.storage_bytes(t)
    return sum(seen.values())


def resident_bytes(model, optimizer, inputs):
    """Bytes live before a step: parameters, buffers, optimizer state, inputs."""
    state = [t for s in optimizer.state.values() for t in s.values()
             if isinstance(t, torch.Tensor)]
    return unique_bytes(list(model.parameters()) + list(model.buffers()) + state +
                        export.flat_tensors(list(inputs)))


def step_peak(run, device, resident):
    """Peak bytes of `run()` (one training step) on `device`."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    running = peak = 0
    for nbytes in export.allocator_events(prof, "cpu"):
        running += nbytes
        peak = max(peak, running)
    return resident + peak


def _training_step(fn, optimizer, inputs):
    def run():
        loss = fn(*inputs)
        loss.backward()
        optimizer.step()
        run.loss = loss.detach()
        del loss
    return run


def _differences(ref_model, model, ref_loss, loss, gradients=True):
    """Names of what differs between two models after one step each
    (without `gradients`: the loss and the buffers only)."""
    out = []
    if not torch.equal(ref_loss, loss):
        out.append("loss (%r vs %r)" % (ref_loss.item(), loss.item()))
    ref_params = dict(ref_model.named_parameters())
    for name, p in model.named_parameters():
        if not gradients:
            break
        q = ref_params[name]
        if (p.grad is None) != (q.grad is None) or \
                (p.grad is not None and not torch.equal(p.grad, q.grad)):
            out.append("gradient of " + name)
        if not torch.equal(p, q):
            out.append("parameter " + name + " after the step")
    ref_buffers = dict(ref_model.named_buffers())
    for name, b in model.named_buffers():
        if not torch.equal(b, ref_buffers[name]):
            out.append("buffer " + name)
    return out


def gradient_error(ref_model, model):
    """||g - g_ref||_2 / ||g_ref||_2 over all parameters' gradients concatenated."""
    ref = dict(ref_model.named_parameters())
    pairs = [(p.grad, ref[n].grad) for n, p in model.named_parameters()
             if p.grad is not None and ref[n].grad is not None]
    return approx.relative_error([a for a, _ in pairs], [b for _, b in pairs])


def _seeded(seed, run):
    torch.manual_seed(seed)
    run()


def measure_plan(model, inputs, plan, optimizer="adam", lr=1e-3, timed_steps=5, seed=1234):
    """Applies `plan` to a copy of `model` and measures one step of it.

    Returns a dict: predicted, measured and eager peak bytes, error_percent
    ((measured - predicted) / predicted), differences (list of what is not
    bit-equal to the eager step; empty when all is), and the median step
    times of the eager and planned steps over `timed_steps` steps each
    (alternating) with their ratio.

    A plan with approximations cannot be bit-equal: its loss and buffers
    still are (the forward is exact), and `gradient_error` is the measured
    relative error of its gradients against the eager step's (the step from
    the same state), beside the plan's `estimated_error` and `max_error`.
    The same plan recomputed exactly runs too, and its median step time and
    time in recompute steps (`exact_step_s`, `exact_recompute_s`) stand
    beside the approximate plan's (`planned_step_s`, `recompute_s`).
    """
    source, plan = plan, load_plan(plan)
    approximate = bool(plan.get("approximations"))
    inputs = tuple(inputs)
    device = next(model.parameters()).device
    ref_model, planned_model = copy.deepcopy(model), copy.deepcopy(model)
    ref_opt = export.make_optimizer(optimizer, ref_model.parameters(), lr)
    opt = export.make_optimizer(optimizer, planned_model.parameters(), lr)
    planned = apply_plan(planned_model, source)
    planned.prepare(*inputs)
    ref_step = _training_step(ref_model, ref_opt, inputs)
    step = _training_step(planned, opt, inputs)
    runs = [("eager", ref_step, ref_opt, None), ("planned", step, opt, planned)]
    if approximate:
        exact_model = copy.deepcopy(model)
        exact_opt = export.make_optimizer(optimizer, exact_model.parameters(), lr)
        exact = apply_plan(exact_model, exact_plan(plan))
        exact.prepare(*inputs)
        runs.append(("exact", _training_step(exact, exact_opt, inputs), exact_opt, exact))
    # Warm-up step: makes the optimizer state, as every step after the first has.
    for _, run, o, _ in runs:
        _seeded(seed, run)
        o.zero_grad(set_to_none=True)
    if approximate:
        # The measured step starts from the same state for both: after a warm-up
        # with approximate gradients the planned model's weights are not eager's.
        planned_model.load_state_dict(ref_model.state_dict())
        opt.load_state_dict(ref_opt.state_dict())
    eager_peak = _measured(ref_model, ref_opt, ref_step, inputs, device, seed + 1)
    # The factor bases live before the step as the parameters do.
    measured = _measured(planned_model, opt, step, inputs, device, seed + 1,
                         planned.runner.factors.nbytes())
    differences = _differences(ref_model, planned_model, ref_step.loss, step.loss,
                               gradients=not approximate)
    grad_error = gradient_error(ref_model, planned_model) if approximate else 0.0
    times = {name: [] for name, _, _, _ in runs}
    recompute = {name: [] for name, _, _, _ in runs}
    for i in range(timed_steps):
        for name, run, o, applied in runs:
            o.zero_grad(set_to_none=True)
            torch.manual_seed(seed + 2 + i)
            if applied is not None:
                applied.runner.recompute_s = 0.0
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[name].append(time.perf_counter() - start)
            if applied is not None:
                recompute[name].append(applied.runner.recompute_s)
    if timed_steps and not approximate:
        differences += ["after %d more steps: %s" % (timed_steps, d) for d in
                        _differences(ref_model, planned_model, ref_step.loss, step.loss)]

    def median(values):
        return statistics.median(values) if values else 0.0

    predicted = plan["predicted_peak_bytes"]
    eager_s, planned_s = median(times["eager"]), median(times["planned"])
    dropped, rerun = planned.recompute_summary()
    result = {
        "device": str(device),
        "predicted_bytes": predicted,
        "measured_bytes": measured,
        "eager_bytes": eager_peak,
        "error_percent": 100.0 * (measured - predicted) / predicted,
        "differences": differences,
        "eager_step_s": eager_s,
        "planned_step_s": planned_s,
        "step_time_ratio": planned_s / eager_s if eager_s else 0.0,
        "predicted_overhead_percent": plan.get("recompute_overhead_percent", 0.0),
        "dropped_tensors": dropped,
        "nodes_rerun": rerun,
        "recompute_s": median(recompute["planned"]),
        "offloaded_tensors": planned.offloaded_count(),
        "host_peak_bytes": plan.get("offload", {}).get("host_peak_bytes", 0),
        "exposed_us": plan.get("offload", {}).get("exposed_us", 0.0),
    }
    if approximate:
        result.update({
            "approximations": len(plan["approximations"]),
            "gradient_error": grad_error,
            "estimated_error": plan.get("estimated_error"),
            "max_error": plan.get("max_error"),
            "exact_step_s": median(times["exact"]),
            "exact_recompute_s": median(recompute["exact"]),
            "factor_bytes": planned.runner.factors.nbytes(),
        })
    return result


def _measured(model, optimizer, run, inputs, device, seed, extra_resident=0):
    resident = resident_bytes(model, optimizer, inputs) + extra_resident
    torch.manual_seed(seed)
    return step_peak(run, device, resident)
