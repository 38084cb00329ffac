#!/usr/bin/python3
"""Exports a PyTorch training step as a ckptplan graph (JSON graph format v1).

The graph is the joint forward/backward graph that AOTAutograd traces by
running autograd itself (so the backward ops and their order are the ones
eager autograd runs), followed by the optimizer step traced with a dispatch
mode. Tensor sizes come from running the joint graph on the real example
inputs: a node output that shares storage with one of the node's inputs is
marked `alias_of` that input; every other output is a new storage of its real
size. What an op allocates inside itself beyond its outputs (a convolution
backward's scratch) is measured on that run from the profiler's allocator
events and recorded as the node's `workspace_bytes`. Forward nodes carry the
module scope they ran in ("h.0/attn/c_attn").

Tensor ids are the joint graph's fx node names (parameters and buffers use
their qualified names), so a plan made on this graph can be applied to the
same model by ckptplan_torch.apply_plan, which runs this very graph.
Exporting leaves the model as it was: buffers (BatchNorm statistics) and the
random number generator are restored afterwards.
"""

import contextlib
import copy
import importlib.util
import json
import operator
import os
import re
import warnings
import weakref

import torch
import torch.fx as fx

try:  # PyTorch 2.x
    from torch._functorch.aot_autograd import aot_module
except ImportError:  # PyTorch 1.13: functorch ships it
    from functorch.compile import aot_module

try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover - very old PyTorch
    TorchDispatchMode = None

FORMAT = "ckptplan.graph"
VERSION = 1

# --------------------------------------------------------------------------
# Small helpers shared with apply.py.


class _Captured(Exception):
    """Stops AOTAutograd once the partition function has seen the joint graph."""


def storage_key(t):
    """Identity of a tensor's storage while it is alive (its data pointer)."""
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


def storage_bytes(t):
    try:
        return t.untyped_storage().nbytes()
    except AttributeError:
        return t.storage().nbytes()


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def scope_of(qualname):
    """'h.0.attn.c_attn' -> 'h.0/attn/c_attn': list indices stay on their container."""
    parts = []
    for part in qualname.split("."):
        if part.isdigit() and parts:
            parts[-1] += "." + part
        else:
            parts.append(part)
    return "/".join(parts)


def flat_tensors(value):
    """Tensors inside nested tuples/lists/dicts, in order."""
    out = []
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            out.extend(flat_tensors(v))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(flat_tensors(v))
    return out


def flat_nodes(value):
    out = []
    if isinstance(value, fx.Node):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            out.extend(flat_nodes(v))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(flat_nodes(v))
    return out


class _ScopeRecorder(TorchDispatchMode if TorchDispatchMode else object):
    """Records (aten op, module scope) for each op of an eager forward."""

    def __init__(self, stack):
        super().__init__()
        self.stack = stack
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append((str(func), self.stack[-1] if self.stack else ""))
        return func(*args, **(kwargs or {}))


def forward_scopes(model, inputs):
    """{(aten op, call index): module scope} of an eager forward of `model`.

    The joint graph's forward runs the same aten ops in the same order, so the
    k-th call of an op there is the k-th call here (the key selective
    checkpointing uses too). Hooks push the scope of each module's forward.
    """
    if TorchDispatchMode is None:
        return {}
    stack, handles = [], []
    for name, module in model.named_modules():
        if not name:
            continue
        scope = scope_of(name)
        handles.append(module.register_forward_pre_hook(
            lambda m, a, s=scope: stack.append(s) and None))
        handles.append(module.register_forward_hook(lambda m, a, o: stack.pop() and None))
    recorder = _ScopeRecorder(stack)
    try:
        with recorder:
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    scopes, counts = {}, {}
    for op, scope in recorder.ops:
        index = counts.get(op, 0)
        counts[op] = index + 1
        scopes[(op, index)] = scope
    return scopes


def _named(model, what):
    """named_parameters/named_buffers with duplicates, as aot_module lifts them."""
    method = getattr(model, "named_" + what)
    try:
        return list(method(remove_duplicate=False))
    except TypeError:  # PyTorch 1.13
        import functorch._src.named_members_polyfill as polyfill
        return list(getattr(polyfill, "_named_" + what)(model, remove_duplicate=False))


def primal_names(model, num_inputs):
    """Names and kinds of the joint graph's primals: parameters, buffers, inputs.

    aot_module passes named_parameters(remove_duplicate=False), then
    named_buffers, then the call's flattened arguments.
    """
    names = []
    for name, _ in _named(model, "parameters"):
        names.append((name, "parameter"))
    for name, _ in _named(model, "buffers"):
        names.append((name, "buffer"))
    for i in range(num_inputs):
        names.append(("input_%d" % i, "input"))
    return names


def primal_values(model, inputs):
    values = [p for _, p in _named(model, "parameters")]
    values += [b for _, b in _named(model, "buffers")]
    return values + flat_tensors(list(inputs))


def capture_joint(model, inputs):
    """Traces model(*inputs) (a scalar loss) with AOTAutograd; returns
    (joint GraphModule, number of forward outputs)."""
    captured = {}

    def partition(joint_module, joint_inputs, **kwargs):
        captured["joint"] = joint_module
        captured["num_fwd_outputs"] = kwargs.get("num_fwd_outputs")
        raise _Captured()

    def compiler(gm, example_inputs):
        return gm

    compiled = aot_module(model, fw_compiler=compiler, bw_compiler=compiler,
                          partition_fn=partition)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compiled(*inputs)
        except _Captured:
            pass
    _drop_trace_slots(primal_values(model, inputs))
    if "joint" not in captured:
        raise RuntimeError("AOTAutograd did not call the partition function")
    joint = captured["joint"]
    num_fwd = captured["num_fwd_outputs"]
    if num_fwd is None:
        num_fwd = joint._out_spec.children_specs[0].num_leaves
    return joint, num_fwd


def _drop_trace_slots(tensors):
    """make_fx leaves its proxies in the traced tensors' __dict__ (under a
    non-string key, and a buffer it wrote as "proxy"); they would break
    copy.deepcopy(model) afterwards."""
    for t in tensors:
        d = getattr(t, "__dict__", None)
        if d:
            for key in [k for k, v in d.items()
                        if not isinstance(k, str) or isinstance(v, fx.Proxy)]:
                del d[key]


def first_backward_index(nodes):
    """Index of the first node that (transitively) reads a tangent."""
    tainted = set()
    for i, node in enumerate(nodes):
        if node.op == "placeholder":
            if "tangent" in str(node.target):
                tainted.add(node)
            continue
        if node.op != "call_function":
            continue
        if any(n in tainted for n in flat_nodes((node.args, node.kwargs))):
            return i
    return len(nodes)


# --------------------------------------------------------------------------
# FLOPs: matrix products exactly, everything else one per output element.


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def node_flops(op, args, outs):
    name = op.split(".")[1] if op.startswith("aten.") else op
    tensors = [a for a in flat_tensors(list(args))]
    out_elems = sum(t.numel() for t in outs)
    try:
        if name in ("mm", "addmm"):
            a, b = (tensors[0], tensors[1]) if name == "mm" else (tensors[1], tensors[2])
            return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        if name in ("bmm", "baddbmm"):
            a, b = (tensors[0], tensors[1]) if name == "bmm" else (tensors[1], tensors[2])
            return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        if name == "convolution" and outs:
            w = tensors[1]
            return 2.0 * outs[0].numel() * _numel(w.shape[1:])
        if name == "convolution_backward" and tensors:
            w = tensors[2]
            return 4.0 * tensors[0].numel() * _numel(w.shape[1:])
    except (IndexError, AttributeError):
        pass
    if name in ("view", "_unsafe_view", "t", "transpose", "permute", "expand", "detach",
                "unsqueeze", "squeeze", "slice", "select", "alias", "as_strided",
                "split", "split_with_sizes", "unbind", "clone", "_to_copy", "copy_"):
        return 0.0
    return float(out_elems)


# --------------------------------------------------------------------------
# The exporter.


# Odd byte count of the marker allocation made between two nodes of the
# measured run: no op of a float graph allocates exactly this.
_MARK_BYTES = 1234567


class _Recorder(fx.Interpreter):
    """Runs the joint graph keeping every value; with `mark`, allocates and
    frees a marker before each node so the profiler's allocator events can be
    split per node."""

    def __init__(self, module, mark=False):
        super().__init__(module, garbage_collect_values=False)
        self.values = {}
        self.mark = mark
        self.device = None  # of the markers: the device the graph runs on
        self.order = []

    def run_node(self, node):
        if self.mark and node.op == "call_function":
            torch.empty(_MARK_BYTES, dtype=torch.uint8, device=self.device)
            self.order.append(node)
        value = super().run_node(node)
        self.values[node] = value
        return value


def allocator_events(prof, device_type="cpu"):
    """Byte deltas of one device type's allocator events in `prof`, in order."""
    want = torch._C._autograd.DeviceType.CUDA if device_type == "cuda" else \
        torch._C._autograd.DeviceType.CPU
    events = [(e.start_us(), e.nbytes()) for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and e.device_type() == want]
    events.sort(key=lambda e: e[0])  # stable: ties keep the recorded order
    return [nbytes for _, nbytes in events]


def node_workspaces(recorder, deltas, device="cpu"):
    """{fx node: the most bytes it had allocated at once while it ran}, from
    the allocator events of a marked run: each node's events lie between two
    markers (+M, -M). The CUDA caching allocator may report a block rounded
    up to 512 bytes, so the marker is recognised by either size (untested on
    CUDA here: no GPU)."""
    marks = {_MARK_BYTES, (_MARK_BYTES + 511) // 512 * 512}
    spans, current, i = [], None, 0
    while i < len(deltas):
        if deltas[i] in marks and i + 1 < len(deltas) and deltas[i + 1] == -deltas[i]:
            current = []
            spans.append(current)
            i += 2
            continue
        if current is not None:
            current.append(deltas[i])
        i += 1
    if len(spans) != len(recorder.order):
        return {}  # the markers were not seen as expected: record no workspace
    out = {}
    for node, span in zip(recorder.order, spans):
        running = peak = 0
        for d in span:
            running += d
            peak = max(peak, running)
        out[node] = peak
    return out


class GraphBuilder:
    """Builds the JSON graph; tracks storages so views become aliases."""

    def __init__(self):
        self.tensors = []
        self.nodes = []
        self.index = {}       # tensor id -> position in self.tensors
        self.key_owner = {}   # storage key -> newest tensor id using it
        self.keep_alive = []  # so that storage keys stay unique

    def add_tensor(self, tid, value, kind="activation", alias_of=None, bytes_=None):
        entry = {"id": tid}
        shape_bytes = value.numel() * value.element_size()
        nbytes = storage_bytes(value) if bytes_ is None else bytes_
        if alias_of is None and nbytes == shape_bytes:
            entry["shape"] = list(value.shape)
            entry["dtype"] = dtype_name(value.dtype)
        else:
            entry["bytes"] = 0 if alias_of is not None else nbytes
        entry["kind"] = kind
        if alias_of is not None:
            entry["alias_of"] = alias_of
        self.index[tid] = len(self.tensors)
        self.tensors.append(entry)
        if value.numel() > 0 or nbytes > 0:
            self.key_owner[storage_key(value)] = tid
        self.keep_alive.append(value)
        return tid

    def add_output(self, tid, value, input_ids_by_key):
        """A node output: an alias of the input sharing its storage, else new."""
        key = storage_key(value)
        if storage_bytes(value) > 0 and key in input_ids_by_key:
            return self.add_tensor(tid, value, alias_of=input_ids_by_key[key])
        return self.add_tensor(tid, value)

    def set_kind(self, tid, kind):
        self.tensors[self.index[tid]]["kind"] = kind

    def root(self, tid):
        entry = self.tensors[self.index[tid]]
        while "alias_of" in entry:
            entry = self.tensors[self.index[entry["alias_of"]]]
        return entry["id"]


def export_graph(model, inputs, optimizer="adam", lr=1e-3, approximations=False):
    """Returns the ckptplan graph (a dict) of one training step of `model`.

    model(*inputs) must return a scalar loss. `optimizer` is "adam", "adamw",
    "sgd" or "none"; its step is traced on copies of the parameters. The
    model's buffers and the random number generator are left as they were.
    With `approximations`, each linear node a plan can re-run gets its
    "approx" options, measured on these weights and inputs (approx.py):
    errors, costs, and the re-run's workspace_bytes and factor_bytes.
    """
    graph = trace_step(model, inputs, optimizer, lr)[0]
    if approximations:
        from . import approx
        with _model_state_kept(model):
            approx.add_options(graph, approx.measure_options(model, tuple(inputs), graph))
    return graph


class Binding:
    """How the exported graph's nodes map onto the joint fx graph: what
    apply.py needs to run the graph itself."""

    def __init__(self, joint, ids, node_of, primal_names, num_fwd, grad_outputs):
        self.joint = joint
        self.ids = ids                    # fx node -> tensor id ({index: id} for tuples)
        self.node_of = node_of            # graph node id -> fx node
        self.primal_names = primal_names  # [(name, kind)] in the joint graph's order
        self.num_fwd = num_fwd
        self.grad_outputs = grad_outputs  # per primal: gradient tensor id or None

    def arg_ids(self, fx_node):
        """The fx node's args and kwargs with each fx node replaced by its
        tensor id (detach chains resolve to the tensor they detach)."""
        return fx.node.map_arg((fx_node.args, fx_node.kwargs), self._id_of)

    def _id_of(self, n):
        return _TensorRef(self.ids.get(n))


class _TensorRef:
    """A tensor id standing where a graph argument was."""
    __slots__ = ("tid",)

    def __init__(self, tid):
        self.tid = tid


@contextlib.contextmanager
def _model_state_kept(model):
    """Restores the model's buffers and the CPU (and CUDA) RNG on exit:
    tracing and measuring runs must not advance BatchNorm statistics or the
    random stream the user's step will draw from."""
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            with torch.no_grad():
                for b, copy_ in saved:
                    b.copy_(copy_)


def trace_step(model, inputs, optimizer="adam", lr=1e-3, workspace=True):
    """export_graph's work: returns (graph, Binding)."""
    with _model_state_kept(model):
        return _trace_step(model, tuple(inputs), optimizer, lr, workspace)


def _trace_step(model, inputs, optimizer, lr, workspace):
    joint, num_fwd = capture_joint(model, inputs)
    graph_nodes = list(joint.graph.nodes)
    names = primal_names(model, len(flat_tensors(list(inputs))))
    primals = primal_values(model, inputs)
    placeholders = [n for n in graph_nodes if n.op == "placeholder"]
    primal_nodes = [n for n in placeholders if "tangent" not in str(n.target)]
    tangent_nodes = [n for n in placeholders if "tangent" in str(n.target)]
    if len(primal_nodes) < len(primals):
        # AOTAutograd passes a tensor bound to two names (tied weights) once.
        seen, kept_names, kept = set(), [], []
        for (name, kind), value in zip(names, primals):
            if id(value) in seen:
                continue
            seen.add(id(value))
            kept_names.append((name, kind))
            kept.append(value)
        names, primals = kept_names, kept
    if len(primal_nodes) != len(primals):
        raise RuntimeError("joint graph has %d primals, expected %d" %
                           (len(primal_nodes), len(primals)))

    # Run the joint graph on the real values: loss tangent = 1.
    with torch.no_grad():
        loss = model(*inputs)
    tangents = [torch.ones_like(loss)] + [None] * (len(tangent_nodes) - 1)
    for i, n in enumerate(tangent_nodes[1:], 1):
        meta = n.meta.get("tensor_meta") or n.meta.get("val")
        tangents[i] = torch.zeros(tuple(meta.shape), dtype=meta.dtype)
    del loss
    recorder = _Recorder(joint, mark=workspace)
    detached = [p.detach() for p in primals]
    recorder.device = detached[0].device if detached else None
    with torch.no_grad():
        if workspace:
            from torch.profiler import ProfilerActivity, profile
            device = detached[0].device.type if detached else "cpu"
            activities = [ProfilerActivity.CPU] + \
                ([ProfilerActivity.CUDA] if device == "cuda" else [])
            with profile(activities=activities, profile_memory=True) as prof:
                outputs = recorder.run(detached, tangents)
            workspaces = node_workspaces(recorder, allocator_events(prof, device), device)
        else:
            outputs = recorder.run(detached, tangents)
            workspaces = {}

    builder = GraphBuilder()
    ids = {}  # fx node -> tensor id, or list of ids for tuple values
    for node, value, (name, kind) in zip(primal_nodes, detached, names):
        ids[node] = builder.add_tensor(name, value, kind)
    for i, (node, value) in enumerate(zip(tangent_nodes, tangents)):
        ids[node] = builder.add_tensor("tangent_%d" % i, value, "input")

    backward_from = first_backward_index(graph_nodes)
    scopes = forward_scopes(model, inputs)
    node_of = {}
    op_counts = {}
    getitems = {}
    for node in graph_nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            getitems[(node.args[0], node.args[1])] = node
    for position, node in enumerate(graph_nodes):
        if node.op == "get_attr":
            value = recorder.values[node]
            if isinstance(value, torch.Tensor):
                ids[node] = builder.add_tensor(node.name, value, "buffer")
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            parent = ids.get(node.args[0])
            if isinstance(parent, dict):
                ids[node] = parent.get(node.args[1])
            continue
        value = recorder.values[node]
        in_ids = []
        for n in flat_nodes((node.args, node.kwargs)):
            tid = ids.get(n)
            if isinstance(tid, str) and tid not in in_ids:
                in_ids.append(tid)
        op = str(node.target)
        if op.startswith("aten.detach") and len(in_ids) == 1:
            ids[node] = in_ids[0]  # same tensor to every reader: no node, no bytes
            continue
        in_values = [v for v in flat_tensors([recorder.values.get(n) for n in
                                              flat_nodes((node.args, node.kwargs))])]
        by_key = {}
        for n in flat_nodes((node.args, node.kwargs)):
            tid = ids.get(n)
            v = recorder.values.get(n)
            if isinstance(tid, str) and isinstance(v, torch.Tensor) and v.numel() > 0:
                by_key.setdefault(storage_key(v), tid)
        out_ids = []
        out_values = []
        if isinstance(value, torch.Tensor):
            out_ids.append(builder.add_output(node.name, value, by_key))
            out_values.append(value)
            ids[node] = node.name
        elif isinstance(value, (tuple, list)):
            elements = {}
            for i, v in enumerate(value):
                if not isinstance(v, torch.Tensor):
                    continue
                user = getitems.get((node, i))
                tid = user.name if user is not None else "%s.%d" % (node.name, i)
                elements[i] = builder.add_output(tid, v, by_key)
                out_ids.append(tid)
                out_values.append(v)
            ids[node] = elements
        if not out_ids:
            continue
        entry = {
            "id": node.name,
            "op": op,
            "phase": "backward" if position >= backward_from else "forward",
            "inputs": in_ids,
            "outputs": out_ids,
            "flops": node_flops(op, [recorder.values.get(n) for n in
                                     flat_nodes((node.args, node.kwargs))], out_values),
        }
        scope = ""
        if position < backward_from:
            index = op_counts.get(op, 0)
            op_counts[op] = index + 1
            scope = scopes.get((op, index), "")
        if scope:
            entry["scope"] = scope
        made = sum(storage_bytes(v) for v, tid in zip(out_values, out_ids)
                   if "alias_of" not in builder.tensors[builder.index[tid]])
        extra = workspaces.get(node, 0) - made
        if extra > 0:
            entry["workspace_bytes"] = extra
        builder.nodes.append(entry)
        node_of[node.name] = node
        del in_values

    # Parameter gradients live from their producer to the end of the step.
    flat_out = flat_tensors_with_none(outputs)
    grads = flat_out[num_fwd:]
    out_node = [n for n in graph_nodes if n.op == "output"][0]
    out_args = flat_nodes_with_none(out_node.args)[num_fwd:]
    grad_ids = {}
    grad_outputs = [None] * len(names)
    for i, (arg, grad) in enumerate(zip(out_args, grads)):
        if arg is None or grad is None or names[i][1] != "parameter":
            continue
        tid = ids[arg]
        grad_outputs[i] = tid
        builder.set_kind(builder.root(tid), "gradient")
        grad_ids[names[i][0]] = (tid, grad)

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    training = {
        "optimizer": optimizer,
        "parameter_count": sum(p.numel() for _, p in params),
        "parameter_dtype": dtype_name(params[0][1].dtype) if params else "float32",
    }
    if optimizer != "none":
        trace_optimizer(builder, model, grad_ids, optimizer, lr)
    graph = {
        "format": FORMAT,
        "version": VERSION,
        "producer": "ckptplan_torch (torch %s)" % torch.__version__,
        "tensors": builder.tensors,
        "nodes": builder.nodes,
        "training": training,
    }
    builder.keep_alive.clear()
    del recorder, outputs
    return graph, Binding(joint, ids, node_of, names, num_fwd, grad_outputs)


def flat_tensors_with_none(value):
    out = []
    if isinstance(value, (tuple, list)):
        for v in value:
            out.extend(flat_tensors_with_none(v))
    else:
        out.append(value if isinstance(value, torch.Tensor) else None)
    return out


def flat_nodes_with_none(value):
    out = []
    if isinstance(value, (tuple, list)):
        for v in value:
            out.extend(flat_nodes_with_none(v))
    else:
        out.append(value if isinstance(value, fx.Node) else None)
    return out


def make_optimizer(optimizer, params, lr):
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr)
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr)
    raise ValueError("unknown optimizer %r (expected adam, adamw, sgd or none)" % optimizer)


class _OptimizerTracer(TorchDispatchMode if TorchDispatchMode else object):
    """Adds each aten op the optimizer runs to the graph as it runs.

    Temporaries are tracked by their storage until Python drops them: a
    temporary that a Python local keeps alive past its last use (Adam's
    `denom` lives until the next parameter's is made) is listed as an extra
    input of the last op that ran before it was freed, so that the graph's
    rule (free after the last reader) frees it when PyTorch does. A Python
    number wrapped into a 0-d tensor for one op gets a node of its own right
    before that op, so it lives only while the op runs.
    """

    def __init__(self, builder):
        super().__init__()
        self.builder = builder
        self.count = 0
        self.live = {}  # storage key -> ids of the Python tensors using it

    def _track(self, tensor, key):
        ids = self.live.setdefault(key, set())
        if id(tensor) in ids:
            return
        ids.add(id(tensor))
        weakref.finalize(tensor, self._dropped, key, id(tensor))

    def _dropped(self, key, obj):
        ids = self.live.get(key)
        if ids is None:
            return
        ids.discard(obj)
        if ids:
            return
        del self.live[key]
        tid = self.builder.key_owner.pop(key, None)
        last = self.builder.nodes[-1] if self.builder.nodes else None
        if tid is None or last is None or last.get("phase") != "optimizer":
            return
        if tid not in last["inputs"] and tid not in last["outputs"]:
            last["inputs"].append(tid)

    def _constant(self, t):
        tid = "opt_const_%d" % self.count
        self.builder.add_tensor(tid, t)
        self.builder.nodes.append({
            "id": "opt_%d_const" % self.count, "op": "aten.scalar_tensor",
            "phase": "optimizer", "inputs": [], "outputs": [tid], "flops": 0.0,
            "scope": "optimizer"})
        self.builder.key_owner.pop(storage_key(t), None)
        return tid

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if str(func).startswith("profiler."):
            return out  # record_function's handle: bookkeeping, not the step's memory
        builder = self.builder
        i = self.count
        self.count += 1
        in_ids, by_key = [], {}
        for t in flat_tensors([args, kwargs]):
            key = storage_key(t)
            tid = builder.key_owner.get(key) if t.numel() > 0 else None
            if tid is None:
                tid = self._constant(t)
            if tid not in in_ids:
                in_ids.append(tid)
            by_key.setdefault(key, tid)
        out_ids = []
        for j, t in enumerate(flat_tensors(out)):
            tid = "opt_%d_%d" % (i, j)
            builder.add_output(tid, t, by_key)
            builder.keep_alive.pop()  # lifetime is Python's, tracked below
            self._track(t, storage_key(t))
            out_ids.append(tid)
        if out_ids:
            op = str(func)
            builder.nodes.append({
                "id": "opt_%d" % i,
                "op": op if op.startswith("aten.") else "aten." + op,
                "phase": "optimizer",
                "inputs": in_ids,
                "outputs": out_ids,
                "flops": float(sum(t.numel() for t in flat_tensors(out))),
                "scope": "optimizer",
            })
        return out


def trace_optimizer(builder, model, grad_ids, optimizer, lr):
    """Appends the optimizer step's aten ops (phase "optimizer") to `builder`.

    The step runs on copies of the parameters whose .grad are the exported
    gradient tensors; state comes from one warm-up step, as in every step
    after the first. Optimizer state becomes "optimizer_state" tensors.
    """
    if TorchDispatchMode is None:
        return
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and n in grad_ids]
    copies = [p.detach().clone() for _, p in named]
    for c in copies:
        c.requires_grad_(True)
    opt = make_optimizer(optimizer, copies, lr)
    for c, (name, _) in zip(copies, named):
        c.grad = grad_ids[name][1]
    with torch.no_grad():
        opt.step()  # creates the state, as the step before the measured one did
    for c, (name, _) in zip(copies, named):
        builder.key_owner[storage_key(c)] = name
        builder.key_owner[storage_key(c.grad)] = grad_ids[name][0]
        for key in sorted(opt.state[c].keys()):
            state = opt.state[c][key]
            if isinstance(state, torch.Tensor):
                builder.add_tensor("%s.%s" % (name, key), state, "optimizer_state")
    tracer = _OptimizerTracer(builder)
    with torch.no_grad(), tracer:
        opt.step()
    del tracer


# --------------------------------------------------------------------------
# Files


def load_factory(spec):
    path, _, func = spec.rpartition(":")
    if not path or not func:
        raise SystemExit("ckptplan_torch: --model must be FILE.py:FUNCTION, got %r" % spec)
    module_spec = importlib.util.spec_from_file_location("ckptplan_model", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, func)


def in_place_form(graph):
    """Rewrites in-place aten ops (names like aten.add_.Tensor) from the alias_of form
    into the in-place form of graph format v1: the node lists the tensor it writes
    among its outputs, and later reads name that tensor. Views keep alias_of."""
    producer = {}
    for node in graph["nodes"]:
        for out in node["outputs"]:
            producer.setdefault(out, node)
    written = {}  # alias id -> id of the tensor whose storage it writes
    for tensor in graph["tensors"]:
        alias, node = tensor.get("alias_of"), producer.get(tensor["id"])
        if alias is None or node is None or alias not in node["inputs"]:
            continue
        parts = node["op"].split(".")
        if len(parts) > 1 and parts[1].endswith("_"):
            written[tensor["id"]] = written.get(alias, alias)
    graph["tensors"] = [t for t in graph["tensors"] if t["id"] not in written]
    for node in graph["nodes"]:
        for key in ("inputs", "outputs"):
            node[key] = [written.get(t, t) for t in node[key]]
    return graph


def write_json(graph, path):
    text = json.dumps(graph, indent=1, sort_keys=False) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
