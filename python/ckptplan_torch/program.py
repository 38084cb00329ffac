"""The step program a plan implies: which graph nodes run, in which order, and
which copy of each tensor every step reads.

It follows the order `ckptplan simulate` gives the steps (lib/ckptplan/
simulator.h says it in full): the graph's nodes in listed order; before the
first non-forward node that reads a dropped forward tensor, the recompute
steps that re-make it (its producer, after any missing ancestors, depth
first). Forward reads use a tensor's original value; non-forward reads of a
dropped tensor use its recomputed copy.

An offloaded tensor (lib/ckptplan/sim/offload.h) is copied to host after
the forward step the plan names `freed_after` (its device value lives to
that step, or to its last forward read if later), and copied back into a new
device tensor before the plan's `reloaded_before` node, ahead of that node's
recompute steps (the simulator's rewrite inserts the reload node there);
non-forward nodes read that reloaded copy. A recompute step that needs it
re-makes it as it would a dropped tensor: in the simulator's rewrite the
offloaded tensor is a forward value no backward node reads, so a recompute
does not find it saved.

The program says nothing about bytes: apply.py frees each value after the
last step that reads it, and the allocator's peak is then what the simulator
predicts.
"""

# The slot a step reads: a tensor's original value, its recomputed copy, or
# its copy reloaded from host.
ORIGINAL, RECOMPUTED, RELOADED = False, True, "reloaded"

RESIDENT_KINDS = ("parameter", "buffer", "input", "optimizer_state")

# aten ops that draw from the random number generator: never recomputed,
# since a re-run would draw different values.
RANDOM_OPS = ("bernoulli", "dropout", "native_dropout", "rand", "randn", "randint",
              "randperm", "normal", "uniform", "multinomial", "exponential", "geometric",
              "cauchy", "log_normal", "rrelu", "poisson")


class PlanError(ValueError):
    """A plan that cannot be applied to this graph as it stands."""


def op_base_name(op):
    """'aten.bernoulli_.float' -> 'bernoulli'."""
    name = op.split(".")[1] if op.startswith("aten.") and "." in op else op
    return name.rstrip("_").lstrip("_")


def is_random_op(op):
    return op_base_name(op) in RANDOM_OPS


class Program:
    """Steps of one training step (forward and backward; the optimizer's
    nodes are left to the real optimizer) and the copy each step reads."""

    def __init__(self, graph, saved, offloaded=None):
        """`saved`: candidates kept on the device; `offloaded`: {tensor:
        (freed_after node id, reloaded_before node id)}, candidates offloaded."""
        self.graph = graph
        self.nodes = graph["nodes"]
        self.tensors = {t["id"]: t for t in graph["tensors"]}
        self.producer = {}
        self.node_index = {node["id"]: i for i, node in enumerate(self.nodes)}
        for i, node in enumerate(self.nodes):
            for t in node["outputs"]:
                self.producer[t] = i
        self.candidates = set()
        for node in self.nodes:
            if node["phase"] == "forward":
                continue
            for t in node["inputs"]:
                if self.forward_produced(t) and not self.resident(t):
                    self.candidates.add(t)
        unknown = sorted(set(saved) - self.candidates)
        if unknown:
            raise PlanError("plan saves tensors that are not candidates of this graph "
                            "(was it made on this model's export?): %s" %
                            ", ".join(unknown[:5]))
        offloaded = dict(offloaded or {})
        unknown = sorted(set(offloaded) - self.candidates)
        if unknown:
            raise PlanError("plan offloads tensors that are not candidates of this graph: %s"
                            % ", ".join(unknown[:5]))
        self.offloaded = offloaded
        self.saved = set(saved) - set(offloaded)
        self.steps = []          # (node index, recompute)
        self.chains = {}         # dropped tensor -> node ids its first use re-ran
        self.offload_after = {}  # step -> tensors copied to host after it
        self.reload_before = {}  # step -> tensors copied back before it
        self._build()

    def root(self, t):
        entry = self.tensors[t]
        while "alias_of" in entry:
            entry = self.tensors[entry["alias_of"]]
        return entry["id"]

    def resident(self, t):
        return self.tensors[self.root(t)].get("kind", "activation") in RESIDENT_KINDS

    def forward_produced(self, t):
        p = self.producer.get(t)
        return p is not None and self.nodes[p]["phase"] == "forward"

    def is_saved(self, t):
        return t in self.candidates and t in self.saved

    def reads_copy(self, t, forward_read):
        """True when a step reads the recomputed copy of `t`."""
        return not (self.resident(t) or forward_read or not self.forward_produced(t)
                    or self.is_saved(t))

    def slot(self, t, forward_read, recompute):
        """Which value of `t` a step reads: ORIGINAL, RECOMPUTED or RELOADED."""
        if not forward_read and not recompute and t in self.offloaded:
            return RELOADED
        return RECOMPUTED if self.reads_copy(t, forward_read) else ORIGINAL

    def _needs(self, t):
        return (self.forward_produced(t) and not self.resident(t) and not self.is_saved(t)
                and t not in self._recomputed)

    def _build(self):
        self._recomputed = set()
        index = {node["id"]: n for n, node in enumerate(self.nodes)}
        copy_out, copy_in = {}, {}
        for t, (freed_after, reloaded_before) in sorted(self.offloaded.items()):
            for name in (freed_after, reloaded_before):
                if name not in index:
                    raise PlanError("tensor %s: the plan's offload names node %s, which is "
                                    "not in this graph" % (t, name))
            copy_out.setdefault(index[freed_after], []).append(t)
            copy_in.setdefault(index[reloaded_before], []).append(t)
        for n, node in enumerate(self.nodes):
            if node["phase"] == "optimizer":
                break
            if n in copy_in:
                self.reload_before.setdefault(len(self.steps), []).extend(copy_in[n])
            if node["phase"] != "forward":
                for t in node["inputs"]:
                    if t not in self.offloaded and self._needs(t):
                        self._materialize(t)
            if n in copy_out:
                self.offload_after[len(self.steps)] = copy_out[n]
            self.steps.append((n, False))
        self._check_offloads(index)

    def _check_offloads(self, index):
        """Each offload is copied out in the forward, after its tensor is
        made, and back in the backward, before its first reader."""
        step_of = {n: s for s, (n, recompute) in enumerate(self.steps) if not recompute}
        out_step = {t: s for s, ts in self.offload_after.items() for t in ts}
        in_step = {t: s for s, ts in self.reload_before.items() for t in ts}
        for t, (freed_after, reloaded_before) in sorted(self.offloaded.items()):
            made = step_of.get(self.producer[t])
            readers = [s for s, (n, recompute) in enumerate(self.steps)
                       if not recompute and self.nodes[n]["phase"] != "forward"
                       and t in self.nodes[n]["inputs"]]
            if self.nodes[index[freed_after]]["phase"] != "forward" or made is None or \
                    out_step.get(t, -1) < made:
                raise PlanError("tensor %s: the plan frees it after node %s, which is not a "
                                "forward node after its producer" % (t, freed_after))
            if self.nodes[index[reloaded_before]]["phase"] == "forward" or \
                    t not in in_step or (readers and in_step[t] > readers[0]):
                raise PlanError("tensor %s: the plan reloads it before node %s, which is not "
                                "a backward node before its first backward reader" %
                                (t, reloaded_before))

    def _materialize(self, target):
        chain = []
        stack = [target]
        while stack:
            t = stack[-1]
            if t in self._recomputed:
                stack.pop()
                continue
            p = self.producer[t]
            missing = next((i for i in self.nodes[p]["inputs"] if self._needs(i)), None)
            if missing is not None:
                stack.append(missing)
                continue
            self.steps.append((p, True))
            chain.append(self.nodes[p]["id"])
            for out in self.nodes[p]["outputs"]:
                if not self.is_saved(out):
                    self._recomputed.add(out)
            stack.pop()
        self.chains[target] = chain

    def recomputed_nodes(self):
        """Indices of the nodes the program re-runs, in first-run order."""
        seen, out = set(), []
        for n, recompute in self.steps:
            if recompute and n not in seen:
                seen.add(n)
                out.append(n)
        return out
