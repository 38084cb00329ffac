"""Applies a ckptplan plan by running the exported joint graph itself.

apply_plan(model, plan) returns a callable: called with the model's inputs
it returns the loss, and loss.backward() fills every parameter's .grad. The
forward runs the graph's forward nodes; the backward runs its backward nodes
in the graph's order, re-running each dropped tensor's producers right
before the first backward node that reads it (program.py), and every value is
released after the last step that reads it. That is the step `ckptplan
simulate` predicts, so the allocator's peak equals the plan's.

Offload decisions move a tensor's bytes out of the device allocator after
the forward step the plan names (`freed_after`) and back into a new tensor
before the backward node it names (`reloaded_before`): on CPU into a numpy
buffer (memory torch's allocator does not own, so its peak falls as the
simulator predicts); on CUDA into a pinned host buffer, copied on a side
stream (written, not run here: no GPU).

Refused, with a PlanError naming the tensor and the op: a plan that
recomputes a random op (dropout's bernoulli_: a re-run would draw other
values) or an op that writes one of its inputs in place. BatchNorm's
native_batch_norm is re-run without its running statistics, so recomputing
it gives the same output and updates the statistics once, as eager does.
BatchNorm with momentum=None is refused (its factor is traced as a constant).

A plan's "approximations" ([{"node", "rank"}], issue #23) make those linear
nodes' re-runs use the rank-r truncated SVD of their weight (approx.py); the
forward and every other re-run stay exact. Each such node's factor basis
(n x r) is made before the first step and kept between steps; its re-run
holds the refresh's and x @ A's temporaries: the graph's factor_bytes and
workspace_bytes, which the plan's predicted peak counts. Refused: an approximation of a node
that is not a linear node on a parameter matrix, at a rank outside 1..min(k,
n), or of a node the plan never re-runs.
"""

import json
import time

import numpy as np
import torch
import torch.nn as nn

from . import approx, export
from .program import ORIGINAL, RELOADED, PlanError, Program, is_random_op

_BATCH_NORM = "aten.native_batch_norm.default"


def load_plan(plan):
    """A plan dict from a path or a dict; PlanError when it is not a plan."""
    if isinstance(plan, dict):
        doc = plan
    else:
        with open(plan) as f:
            doc = json.load(f)
    if doc.get("format") != "ckptplan.plan":
        raise PlanError("%s: not a ckptplan plan file (format must be ckptplan.plan)" %
                        (plan if not isinstance(plan, dict) else "plan"))
    return doc


def saved_set(plan, program, source="plan"):
    """Candidates the plan saves: those it marks save, and those it does not
    name (a plan file's unnamed candidates are saved, as ckptplan reads it)."""
    actions = {d["tensor"]: d["action"] for d in plan["decisions"]}
    unknown = sorted(t for t in actions if t not in program.candidates)
    if unknown:
        raise PlanError("%s names tensors that are not candidates of this model's graph "
                        "(was it made on this model's export, with these input shapes?): %s"
                        % (source, ", ".join(unknown[:5])))
    return {t for t in program.candidates if actions.get(t, "save") == "save"}


def offloaded_set(plan):
    """{tensor: (freed_after, reloaded_before)} of the plan's offload decisions."""
    out = {}
    for d in plan["decisions"]:
        if d.get("action") != "offload":
            continue
        if not isinstance(d.get("freed_after"), str) or \
                not isinstance(d.get("reloaded_before"), str):
            raise PlanError("tensor %s: an offload decision needs freed_after and "
                            "reloaded_before (node names)" % d.get("tensor"))
        out[d["tensor"]] = (d["freed_after"], d["reloaded_before"])
    return out


class _HostCopies:
    """Offloaded tensors' bytes while they are off the device.

    out(t) copies a device tensor's whole storage to host; back(key) makes
    a new device tensor of that storage's size, copies the bytes back and
    returns it with the original sizes, strides and offset. On CPU the host
    buffer is a numpy array, memory the torch allocator never sees. On CUDA
    it is a pinned buffer and both copies run on a side stream: the copy out
    starts once the compute stream has made the tensor, and its storage goes
    back to the caching allocator for reuse only when the copy completes
    (record_stream); the compute stream waits for a copy back only when its
    first reader is about to run (ready), so the copy overlaps the steps in
    between. (The CUDA path is unvalidated: it was never run on a GPU.)
    """

    def __init__(self):
        self.held = {}
        self.pending = {}  # key -> CUDA event recorded after its copy back
        self.stream = None

    def _side_stream(self, device):
        if self.stream is None:
            self.stream = torch.cuda.Stream(device)
        return self.stream

    def out(self, key, t):
        count = export.storage_bytes(t) // t.element_size()
        whole = t.as_strided((count,), (1,), 0)
        layout = (t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, count)
        if t.device.type == "cuda":
            host = torch.empty(count, dtype=t.dtype, pin_memory=True)
            stream = self._side_stream(t.device)
            stream.wait_stream(torch.cuda.current_stream(t.device))
            with torch.cuda.stream(stream):
                host.copy_(whole, non_blocking=True)
            t.record_stream(stream)
        else:
            buffer = np.empty(count * t.element_size(), dtype=np.uint8)
            host = torch.from_numpy(buffer).view(t.dtype)
            host.copy_(whole)
        self.held[key] = (host, layout)

    def back(self, key):
        host, (shape, stride, offset, dtype, device, count) = self.held.pop(key)
        whole = torch.empty(count, dtype=dtype, device=device)
        if device.type == "cuda":
            stream = self._side_stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                whole.copy_(host, non_blocking=True)
            whole.record_stream(stream)
            done = torch.cuda.Event()
            done.record(stream)
            self.pending[key] = (done, device)
        else:
            whole.copy_(host)
        return whole.as_strided(shape, stride, offset)

    def ready(self, key):
        """Makes the compute stream wait for `key`'s copy back (CUDA)."""
        pending = self.pending.pop(key, None)
        if pending is not None:
            done, device = pending
            torch.cuda.current_stream(device).wait_event(done)


def _writes_input(target):
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def check_recomputable(program):
    """Raises PlanError when the program re-runs a node it must not."""
    for n in program.recomputed_nodes():
        node = program.nodes[n]
        dropped = [t for t, chain in program.chains.items() if node["id"] in chain]
        what = "node %s (%s), needed to recompute %s" % (node["id"], node["op"],
                                                         ", ".join(sorted(dropped)[:3]))
        if is_random_op(node["op"]):
            raise PlanError("plan recomputes a random op: %s; its re-run would draw other "
                            "values (plan with a ckptplan that never recomputes random ops)"
                            % what)


def check_model(model):
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.training and \
                module.track_running_stats and module.momentum is None:
            raise PlanError("module %s: BatchNorm with momentum=None is not supported (its "
                            "averaging factor changes every step, the traced graph holds one)"
                            % name)


class _Runner:
    """Runs a Program's steps over the joint graph's fx nodes."""

    def __init__(self, program, binding, keep):
        self.program = program
        self.binding = binding
        self.keep = set(keep)  # tensor ids held to the end (the loss, gradients)
        self.refs = {}
        self.approx = {}         # node id -> rank its re-runs use (approximate recompute)
        self.factors = approx.Factors()
        self.capture = None      # {node id: None} -> (target, args, kwargs) of its re-run
        self.recompute_s = 0.0   # seconds spent in recompute steps since last reset
        self.host = _HostCopies()
        nodes = program.nodes
        for n, recompute in program.steps:
            fx_node = binding.node_of.get(nodes[n]["id"])
            if fx_node is None:
                raise PlanError("graph node %s is not in the model's joint graph" %
                                nodes[n]["id"])
            if recompute and _writes_input(fx_node.target) and \
                    str(fx_node.target) != _BATCH_NORM:
                raise PlanError("plan recomputes node %s (%s), which writes its input in "
                                "place" % (nodes[n]["id"], nodes[n]["op"]))
        self.first_backward = next((i for i, (n, r) in enumerate(program.steps)
                                    if r or nodes[n]["phase"] != "forward"),
                                   len(program.steps))
        self._plan_frees()

    def _slot_reads(self, step):
        n, recompute = self.program.steps[step]
        node = self.program.nodes[n]
        forward_read = node["phase"] == "forward" and not recompute
        reads = [(t, self.program.slot(t, forward_read, recompute)) for t in node["inputs"]]
        # A copy to host after this step reads the tensor's original value.
        return reads + [(t, ORIGINAL) for t in self.program.offload_after.get(step, ())]

    def _plan_frees(self):
        """frees[s]: slots (tensor id, is copy) released after step s."""
        program = self.program
        last = {}
        for s, (n, recompute) in enumerate(program.steps):
            for slot in self._slot_reads(s):
                last[slot] = s
            for t in program.nodes[n]["outputs"]:
                last.setdefault((t, recompute), s)  # never read: freed at once
            for t in program.reload_before.get(s, ()):
                last.setdefault((t, RELOADED), s)
        keep = {t for t in program.tensors if self._kept_to_end(t)}
        self.frees = [[] for _ in program.steps]
        for slot, s in last.items():
            if slot[0] in keep:
                continue
            self.frees[s].append(slot)

    def _kept_to_end(self, t):
        entry = self.program.tensors[self.program.root(t)]
        return entry.get("kind") == "gradient" or t in self.keep

    def run(self, values, begin, end):
        """Runs steps [begin, end) on `values` ({(tensor id, is copy): tensor})."""
        program = self.program
        for s in range(begin, end):
            n, recompute = program.steps[s]
            node = program.nodes[n]
            fx_node = self.binding.node_of[node["id"]]
            forward_read = node["phase"] == "forward" and not recompute
            for t in program.reload_before.get(s, ()):
                values[(t, RELOADED)] = self.host.back(t)
            if self.host.pending:
                for t in node["inputs"]:
                    if program.slot(t, forward_read, recompute) == RELOADED:
                        self.host.ready(t)

            def value_of(ref):
                if not isinstance(ref, export._TensorRef):
                    return ref
                if ref.tid is None:
                    raise PlanError("node %s reads a value the graph does not name" %
                                    node["id"])
                return values[(ref.tid, program.slot(ref.tid, forward_read, recompute))]

            refs = self.refs.get(fx_node)
            if refs is None:
                refs = self.refs[fx_node] = self.binding.arg_ids(fx_node)
            args, kwargs = refs
            args = _map_refs(args, value_of)
            kwargs = _map_refs(kwargs, value_of)
            if recompute and str(fx_node.target) == _BATCH_NORM:
                args = list(args)
                args[3] = args[4] = None  # the statistics were updated by the forward
            start = time.perf_counter() if recompute else 0.0
            if recompute and node["id"] in self.approx:
                out = approx.call(fx_node.target, args, kwargs, self.approx[node["id"]],
                                  self.factors, node["id"])
            else:
                out = fx_node.target(*args, **kwargs)
            if recompute:
                self.recompute_s += time.perf_counter() - start
                if self.capture is not None and node["id"] in self.capture:
                    self.capture[node["id"]] = (fx_node.target, args, kwargs)
            del args, kwargs
            self._store(values, fx_node, node, out, recompute)
            del out
            for t in program.offload_after.get(s, ()):
                self.host.out(t, values[(t, ORIGINAL)])
            for slot in self.frees[s]:
                values.pop(slot, None)

    def _store(self, values, fx_node, node, out, recompute):
        ids = self.binding.ids.get(fx_node)
        if isinstance(ids, dict):
            pairs = [(tid, out[i]) for i, tid in ids.items()]
        else:
            pairs = [(node["id"] if ids is None else ids, out)]
        for tid, value in pairs:
            if not recompute:
                values[(tid, False)] = value
            elif not self.program.is_saved(tid) and (tid, True) not in values:
                values[(tid, True)] = value


def _map_refs(value, fn):
    if isinstance(value, (list, tuple)):
        return type(value)(_map_refs(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_refs(v, fn) for k, v in value.items()}
    return fn(value)


class _PlannedStep(torch.autograd.Function):
    """forward: the program's forward steps; backward: the rest."""

    @staticmethod
    def forward(ctx, runner, resident, num_grads, *params):
        values = dict(resident)
        for (tid, _), p in zip(runner.param_slots, params):
            values[(tid, False)] = p
        runner.run(values, 0, runner.first_backward)
        loss = values[(runner.loss_id, False)]
        ctx.runner = runner
        ctx.values = values
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        runner, values = ctx.runner, ctx.values
        del ctx.values
        values[(runner.tangent_id, False)] = grad_loss
        runner.run(values, runner.first_backward, len(runner.program.steps))
        grads = tuple(values.get((tid, False)) if tid is not None else None
                      for tid in runner.param_grads)
        values.clear()
        del values
        return (None, None, None) + grads


class PlannedModel:
    """The callable apply_plan returns. The first call traces the model on its
    inputs (the graph must be the one the plan was made on); later calls with
    inputs of the same shapes reuse it."""

    def __init__(self, model, plan):
        self.model = model
        self.source = plan if isinstance(plan, str) else "plan"
        self.plan = load_plan(plan)
        self.runner = None
        self.program = None
        check_model(model)

    def prepare(self, *inputs):
        graph, binding = export.trace_step(self.model, inputs, optimizer="none",
                                           workspace=False)
        self.graph = graph
        self.binding = binding
        probe = Program(graph, ())
        program = Program(graph, saved_set(self.plan, probe, self.source),
                          offloaded_set(self.plan))
        check_recomputable(program)
        self._check_chains(program)
        loss_id = binding.ids[_output_nodes(binding)[0]]
        runner = _Runner(program, binding, keep=[loss_id])
        names = binding.primal_names
        params = dict(export._named(self.model, "parameters"))
        buffers = dict(export._named(self.model, "buffers"))
        runner.param_slots, runner.param_names, runner.param_grads = [], [], []
        runner.other = []
        for i, (name, kind) in enumerate(names):
            if kind == "parameter" and params[name].requires_grad:
                runner.param_slots.append((name, False))
                runner.param_names.append(name)
                runner.param_grads.append(binding.grad_outputs[i])
            else:
                runner.other.append((name, kind))
        runner.loss_id = loss_id
        runner.tangent_id = "tangent_0"
        runner.buffers = buffers
        runner.params = params
        runner.approx = approximations(self.plan, program, graph, binding, self.source)
        runner.linear_weights = linear_weights(graph, binding)
        self.program = program
        self.runner = runner
        self._shapes = _shapes(inputs)
        self._batch_norm_calls = _batch_norm_calls(self.model, graph)

    def _check_chains(self, program):
        """The plan's recompute chains are the ones this program runs: the
        program follows the simulator's order (a mismatch is a bug here)."""
        for d in self.plan["decisions"]:
            if d.get("action") not in ("recompute", "recompute_approx") or "chain" not in d:
                continue
            ours = program.chains.get(d["tensor"])
            if ours is not None and ours != d["chain"]:
                raise PlanError("tensor %s: the plan re-runs %s, this runner %s" %
                                (d["tensor"], d["chain"], ours))

    def __call__(self, *inputs):
        if self.runner is None or _shapes(inputs) != self._shapes:
            self.prepare(*inputs)
        runner = self.runner
        resident = {}
        flat_inputs = export.flat_tensors(list(inputs))
        k = 0
        for name, kind in runner.other:
            if kind == "parameter":
                resident[(name, False)] = runner.params[name].detach()
            elif kind == "buffer":
                resident[(name, False)] = runner.buffers[name]
            else:
                resident[(name, False)] = flat_inputs[k]
                k += 1
        params = [runner.params[n] for n in runner.param_names]
        self._prime_factors()
        loss = _PlannedStep.apply(runner, resident, len(params), *params)
        with torch.no_grad():
            for counter, calls in self._batch_norm_calls:
                counter.add_(calls)
        return loss

    def _prime_factors(self):
        """Makes each approximated node's first basis (an SVD) before the
        step, when only resident state is live, so that no re-run holds the
        SVD's temporaries; later steps refresh it at the re-run."""
        runner = self.runner
        for node_id, rank in sorted(runner.approx.items()):
            name, transposed = runner.linear_weights[node_id]
            weight = runner.params[name].detach()
            runner.factors.prime(node_id, weight.t() if transposed else weight, rank)

    def recompute_summary(self):
        """(candidates the plan drops, nodes re-run) of the applied program."""
        dropped = self.program.candidates - self.program.saved - set(self.program.offloaded)
        return len(dropped), len(self.program.recomputed_nodes())

    def offloaded_count(self):
        """Tensors the applied program offloads."""
        return len(self.program.offloaded)


def approximations(plan, program, graph, binding, source="plan"):
    """{node id: rank} from the plan's "approximations"; PlanError when one
    names a node that is not a linear node of this graph, a rank outside
    1..min(k, n), or a node the program never re-runs."""
    entries = plan.get("approximations") or []
    if not entries:
        return {}
    linears = approx.linear_nodes(graph, binding)
    tensors = {t["id"]: t for t in graph["tensors"]}
    rerun = {program.nodes[n]["id"] for n in program.recomputed_nodes()}
    out = {}
    for e in entries:
        node, rank = e.get("node"), e.get("rank")
        if node not in linears:
            raise PlanError("%s: approximation of node %s: not a linear node of this graph "
                            "(mm or addmm on a parameter matrix)" % (source, node))
        limit = min(tensors[linears[node]]["shape"])
        if not isinstance(rank, int) or not 1 <= rank <= limit:
            raise PlanError("%s: approximation of node %s: rank %r, expected an integer in "
                            "1..%d" % (source, node, rank, limit))
        if node not in rerun:
            raise PlanError("%s: approximation of node %s, which this plan never re-runs" %
                            (source, node))
        out[node] = rank
    return out


def linear_weights(graph, binding):
    """{linear node id: (parameter name, whether its operand M is the
    parameter's transpose)} (approx.linear_nodes)."""
    out = {}
    for node_id, param in approx.linear_nodes(graph, binding).items():
        fx_node = binding.node_of[node_id]
        operand = binding.arg_ids(fx_node)[0][approx.LINEAR_OPS[str(fx_node.target)]]
        out[node_id] = (param, operand.tid != param)
    return out


def exact_plan(plan):
    """The plan with its approximations dropped: the same decisions, recomputed exactly."""
    doc = {k: v for k, v in plan.items()
           if k not in ("approximations", "max_error", "estimated_error")}
    doc["decisions"] = [dict(d, action="recompute") if d.get("action") == "recompute_approx"
                        else d for d in plan["decisions"]]
    return doc


def _output_nodes(binding):
    out = [n for n in binding.joint.graph.nodes if n.op == "output"][0]
    return export.flat_nodes_with_none(out.args)[:binding.num_fwd]


def _shapes(inputs):
    return [tuple(t.shape) for t in export.flat_tensors(list(inputs))]


def _batch_norm_calls(model, graph):
    """[(num_batches_tracked buffer, calls per forward)]: what eager BatchNorm
    does besides its graph. The traced joint graph drops the
    num_batches_tracked += 1 of each training BatchNorm call; its calls are
    the forward native_batch_norm nodes that read the module's running_mean."""
    reads = {}
    for node in graph["nodes"]:
        if node["phase"] == "forward" and node["op"] == _BATCH_NORM:
            for t in node["inputs"]:
                reads[t] = reads.get(t, 0) + 1
    out = []
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.training and \
                module.track_running_stats and module.num_batches_tracked is not None:
            calls = reads.get((name + "." if name else "") + "running_mean", 0)
            if calls:
                out.append((module.num_batches_tracked, calls))
    return out


def apply_plan(model, plan):
    """Returns a callable: f(*inputs) -> loss, whose backward follows `plan`
    (a path or a parsed plan made on export_graph(model, inputs))."""
    return PlannedModel(model, plan)
