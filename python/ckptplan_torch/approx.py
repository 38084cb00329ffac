"""Approximate recompute (issue #23): re-running a linear layer at low rank.

A linear node is a forward `aten.mm(x, M)` or `aten.addmm(bias, x, M)` whose
matrix operand M (k x n) is a 2-D parameter or a transpose view of one (how
AOTAutograd writes nn.Linear: `t(weight)` then addmm). Its approximation at
rank r replaces M by the rank-r truncated SVD A @ B (A: k x r, B: r x n), so
the re-run computes (x @ A) @ B: 2 m r (k + n) FLOPs instead of 2 m k n. Only
re-runs during recomputation are approximate; the forward always runs exactly.

The factors are refreshed at the node's re-run from the weight as it is then
(once per step: a node re-runs at most once per step): the first basis from
the exact SVD, made before the step, then by one step of subspace iteration
from the previous step's basis (class Factors). No random numbers are drawn,
so dropout masks stay as eager's. The basis (kept all step) and the re-run's
temporaries are memory the plan counts: the exporter writes them as the
options' factor_bytes and workspace_bytes (rerun_memory).

`measure_options` measures what the exporter writes into the graph: per
candidate node and rank, the relative error of the step's parameter gradients
(||g_approx - g||_2 / ||g||_2 over all parameters concatenated) when that
node's re-run alone is approximate in the program that recomputes every
candidate it may (the most backward reads a node's re-run can reach: an upper
estimate of its error under any plan), plus the relative error of its output
and the re-run's measured time.
"""

import copy
import statistics
import time

import torch

LINEAR_OPS = {"aten.mm.default": 1, "aten.addmm.default": 2}  # op -> operand position of M
TRANSPOSE_OPS = ("aten.t.default", "aten.transpose.int", "aten.permute.default")


def linear_nodes(graph, binding):
    """{node id: parameter name} of the forward linear nodes of `graph`."""
    tensors = {t["id"]: t for t in graph["tensors"]}
    producer = {t: n for n in graph["nodes"] for t in n["outputs"]}
    out = {}
    for node in graph["nodes"]:
        pos = LINEAR_OPS.get(node["op"])
        if node["phase"] != "forward" or pos is None:
            continue
        fx_node = binding.node_of.get(node["id"])
        args = binding.arg_ids(fx_node)[0] if fx_node is not None else ()
        if len(args) <= pos or getattr(args[pos], "tid", None) is None:
            continue
        param = _parameter_behind(args[pos].tid, tensors, producer)
        if param is not None and len(tensors[param].get("shape", ())) == 2:
            out[node["id"]] = param
    return out


def _parameter_behind(tid, tensors, producer):
    """The parameter `tid` is, or is a transpose view of; else None."""
    entry = tensors[tid]
    if entry.get("kind") == "parameter":
        return tid
    made_by = producer.get(tid)
    if "alias_of" not in entry or made_by is None or made_by["op"] not in TRANSPOSE_OPS:
        return None
    base = tensors.get(entry["alias_of"])
    return base["id"] if base is not None and base.get("kind") == "parameter" else None


def ranks_for(k, n):
    """The ranks measured for a k x n operand: d/32, d/16, ..., d/2 (d = min(k, n))
    that make the re-run cheaper than the exact product."""
    d = min(k, n)
    out = []
    for div in (32, 16, 8, 4, 2):
        r = d // div
        if r >= 1 and r not in out and r * (k + n) < k * n:
            out.append(r)
    return out


class Factors:
    """Rank-r factor basis V (n x r, orthonormal columns) of each approximated
    node's weight M (k x n): the first from the exact SVD (prime, before the
    step: PlannedModel calls it, so that no re-run holds an SVD's
    temporaries), later ones refreshed at the node's re-run by one step of
    subspace iteration from the previous basis (the weight moves little per
    optimizer step, so the basis keeps tracking its top singular directions at
    about 6 k n r FLOPs instead of an SVD's).

    Memory, what the exporter writes into the graph and the plan counts: V is
    kept all step and between steps (the option's factor_bytes, n r x element
    size); the re-run's temporaries (M V, M^T M V, the QR's, then A = M V and
    x @ A, each freed as soon as it is used) are its workspace_bytes."""

    def __init__(self):
        self.basis = {}    # node id -> V (n x r, orthonormal columns)
        self.fresh = set()  # node ids whose basis the SVD made since their last re-run

    def nbytes(self):
        """Bytes the bases hold, all step and between steps."""
        return sum(v.numel() * v.element_size() for v in self.basis.values())

    def prime(self, node_id, m, rank):
        """Makes the node's basis from the exact SVD of m (k x n) when it has
        none of this shape and dtype."""
        m = m.detach()
        v = self.basis.get(node_id)
        if v is not None and v.shape == (m.shape[1], rank) and v.dtype == m.dtype:
            return
        self.basis.pop(node_id, None)
        self.basis[node_id] = torch.linalg.svd(m, full_matrices=False)[2][:rank].t().contiguous()
        self.fresh.add(node_id)

    def refresh(self, node_id, m, rank):
        """The basis this re-run uses: a freshly primed one as made, else one
        step of subspace iteration from the last one, V <- orth(M^T M V)."""
        m = m.detach()
        self.prime(node_id, m, rank)
        if node_id in self.fresh:
            self.fresh.discard(node_id)
            return self.basis[node_id]
        v = self.basis[node_id]
        s = torch.mm(m.t(), torch.mm(m, v))
        q = torch.linalg.qr(s)[0]
        del s
        v.copy_(q)  # in place: the basis keeps its storage from step to step
        return v


def call(target, args, kwargs, rank, factors, node_id):
    """The linear node `target(*args, **kwargs)` with its operand M at `rank`:
    (x @ (M V)) @ V^T, V refreshed (Factors.refresh); A = M V is freed once
    x @ A is made, V^T is a view."""
    op = str(target)
    if op == "aten.mm.default":
        x, m = args[0], args[1]
        v = factors.refresh(node_id, m, rank)
        return torch.mm(torch.mm(x, torch.mm(m.detach(), v)), v.t())
    if op == "aten.addmm.default":
        bias, x, m = args[0], args[1], args[2]
        v = factors.refresh(node_id, m, rank)
        return torch.addmm(bias, torch.mm(x, torch.mm(m.detach(), v)), v.t(),
                           beta=kwargs.get("beta", 1), alpha=kwargs.get("alpha", 1))
    raise ValueError("not a linear node: %s" % op)


def rerun_memory(target, args, kwargs, rank, factors, node_id):
    """(workspace_bytes, factor_bytes) of the node's approximate re-run with
    warm `factors` (a basis already made, as every re-run after the first
    step has): the most bytes the re-run allocates at once beyond its output
    (the exporter's rule for a node's workspace), measured at the allocator
    with torch.profiler, and the basis's bytes."""
    from torch.profiler import ProfilerActivity, profile
    from .export import allocator_events, storage_bytes
    device = args[0].device.type if isinstance(args[0], torch.Tensor) else "cpu"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), profile(activities=activities, profile_memory=True) as prof:
        out = call(target, args, kwargs, rank, factors, node_id)
    running = peak = 0
    for delta in allocator_events(prof, device):
        running += delta
        peak = max(peak, running)
    v = factors.basis[node_id]
    return max(0, peak - storage_bytes(out)), v.numel() * v.element_size()


def option_flops(op, m, k, n, rank):
    """FLOPs of the approximate re-run of an m x k by k x n product at `rank`:
    the two thin products, the bias add of addmm and the factors' refresh (three
    k x n by n x r products and an n x r QR)."""
    flops = 2.0 * m * rank * (k + n) + 6.0 * k * n * rank + 4.0 * n * rank ** 2
    if op == "aten.addmm.default":
        flops += float(m * n)
    return flops


def relative_error(approx, exact):
    """||approx - exact||_2 / ||exact||_2 of two lists of tensors (concatenated)."""
    num = sum(float((a.double() - e.double()).pow(2).sum()) for a, e in zip(approx, exact))
    den = sum(float(e.double().pow(2).sum()) for e in exact)
    return (num / den) ** 0.5 if den > 0 else 0.0


def _median_us(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def recompute_all_plan(graph):
    """A plan dict dropping every candidate whose recompute re-runs no random
    op (the program where a node's re-run reaches the most backward reads)."""
    from .program import Program, is_random_op
    probe = Program(graph, ())
    saved = set()
    while True:
        program = Program(graph, saved)
        random = {t for t, chain in program.chains.items()
                  if any(is_random_op(program.nodes[program.node_index[c]]["op"])
                         for c in chain)}
        if not random - saved:
            break
        saved |= random
    return {"format": "ckptplan.plan", "predicted_peak_bytes": 0,
            "decisions": [{"tensor": t, "action": "save" if t in saved else "recompute"}
                          for t in sorted(probe.candidates)]}


def _step_gradients(planned, model, inputs, seed):
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(seed)
    loss = planned(*inputs)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    for p in model.parameters():
        p.grad = None
    return grads


def measure_options(model, inputs, graph, ranks=None, seed=0, repeats=5):
    """{node id: [option dicts]} for the graph's linear nodes that a plan can
    re-run (see the module doc); `ranks(k, n)` lists the ranks to measure."""
    from .apply import apply_plan
    ranks = ranks or ranks_for
    work = copy.deepcopy(model)
    planned = apply_plan(work, recompute_all_plan(graph))
    planned.prepare(*inputs)
    runner, program = planned.runner, planned.program
    linears = linear_nodes(planned.graph, planned.binding)
    rerun = {program.nodes[n]["id"] for n in program.recomputed_nodes()}
    targets = sorted((n for n in linears if n in rerun), key=program.node_index.get)
    runner.capture = {n: None for n in targets}
    runner.factors = Factors()
    exact = _step_gradients(planned, work, inputs, seed)
    captured, runner.capture = runner.capture, None
    out = {}
    for node_id in targets:
        target, args, kwargs = captured[node_id]
        exact_out = target(*args, **kwargs)
        pos = LINEAR_OPS[str(target)]
        x, m = args[pos - 1], args[pos]
        rows, (k, n) = x.shape[0], m.shape
        options = []
        for rank in ranks(k, n):
            flops = option_flops(str(target), rows, k, n, rank)
            if flops >= _node_flops(program, node_id):
                continue  # no cheaper than the exact re-run
            runner.approx, runner.factors = {node_id: rank}, Factors()
            grads = _step_gradients(planned, work, inputs, seed)
            runner.approx = {}
            warm = runner.factors  # its basis as a later step starts from
            approx_out = call(target, args, kwargs, rank, Factors(), node_id)
            workspace, factor_bytes = rerun_memory(target, args, kwargs, rank, warm, node_id)
            options.append({
                "rank": rank,
                "flops": flops,
                "time_us": round(_median_us(
                    lambda: call(target, args, kwargs, rank, warm, node_id), repeats), 1),
                "error": relative_error(grads, exact),
                "output_error": relative_error([approx_out], [exact_out]),
                "workspace_bytes": workspace,
                "factor_bytes": factor_bytes,
            })
        out[node_id] = options
    return out


def _node_flops(program, node_id):
    return program.nodes[program.node_index[node_id]].get("flops", 0.0)


def add_options(graph, options):
    """Writes `options` ({node id: [option]}) as the nodes' "approx" field."""
    for node in graph["nodes"]:
        if options.get(node["id"]):
            node["approx"] = options[node["id"]]
    return graph
