"""The step program a plan implies: which graph nodes run, in which order, and
which copy of each tensor every step reads.

It follows the order `ckptplan simulate` gives the steps (lib/ckptplan/
simulator.h says it in full): the graph's nodes in listed order; before the
first non-forward node that reads a dropped forward tensor, the recompute
steps that re-make it (its producer, after any missing ancestors, depth
first). Forward reads use a tensor's original value; non-forward reads of a
dropped tensor use its recomputed copy. The program says nothing about
bytes: apply.py frees each value after the last step that reads it, and the
allocator's peak is then what the simulator predicts.
"""

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

    def __init__(self, graph, saved):
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
        self.saved = set(saved)
        self.steps = []          # (node index, recompute)
        self.chains = {}         # dropped tensor -> node ids its first use re-ran
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

    def _needs(self, t):
        return (self.forward_produced(t) and not self.resident(t) and not self.is_saved(t)
                and t not in self._recomputed)

    def _build(self):
        self._recomputed = set()
        for n, node in enumerate(self.nodes):
            if node["phase"] == "optimizer":
                break
            if node["phase"] != "forward":
                for t in node["inputs"]:
                    if self._needs(t):
                        self._materialize(t)
            self.steps.append((n, False))

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
