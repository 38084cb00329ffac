#!/usr/bin/env python3
"""Writes the bad-input corpus tests/bad_inputs/ and its manifest.json.

Each case is a file (or flag value) ckptplan must reject with a documented
exit code and a message fragment, leaving no output file. tests/
bad_inputs_test.cc runs every case through the CLI. Run from the repository
root:  /usr/bin/python3 scripts/make_bad_inputs.py
Crash inputs found by the fuzzers live in tests/bad_inputs/graphs/fuzz_*
and tests/bad_inputs/plans/fuzz_*; they are listed in EXTRA below.
"""
import copy
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bad_inputs")
BAD_INPUT, USAGE, INFEASIBLE, IO = 4, 2, 3, 5

# A valid graph: x -> f -> a -> l -> loss; backward reads a and x.
GOOD = {
    "format": "ckptplan.graph",
    "version": 1,
    "training": {"optimizer": "sgd"},
    "tensors": [
        {"id": "x", "bytes": 1024, "kind": "input"},
        {"id": "w", "bytes": 64, "kind": "parameter"},
        {"id": "a", "shape": [16, 16], "dtype": "float32"},
        {"id": "loss", "bytes": 4},
        {"id": "da", "bytes": 1024},
        {"id": "dw", "bytes": 64, "kind": "gradient"},
    ],
    "nodes": [
        {"id": "f", "op": "matmul", "phase": "forward", "inputs": ["x", "w"], "outputs": ["a"],
         "flops": 1000},
        {"id": "l", "op": "sum", "phase": "forward", "inputs": ["a"], "outputs": ["loss"],
         "flops": 10},
        {"id": "lb", "op": "sum_grad", "phase": "backward", "inputs": ["loss", "a"],
         "outputs": ["da"], "flops": 10},
        {"id": "fb", "op": "matmul_grad", "phase": "backward", "inputs": ["da", "x"],
         "outputs": ["dw"], "flops": 1000},
    ],
}

cases = []


def graph_case(name, graph=None, message="", exit_code=BAD_INPUT, raw=None, extra_args=(),
               budget="1GiB"):
    path = os.path.join("graphs", name)
    with open(os.path.join(ROOT, path), "wb") as f:
        if raw is not None:
            f.write(raw if isinstance(raw, bytes) else raw.encode())
        else:
            f.write((json.dumps(graph, indent=1) + "\n").encode())
    cases.append({"name": name, "args": ["plan", "{dir}/" + path, "--budget", budget,
                                         "-o", "{out}", *extra_args],
                  "exit": exit_code, "message": message})


def edit(fn):
    g = copy.deepcopy(GOOD)
    fn(g)
    return g


def tensor(g, name):
    return next(t for t in g["tensors"] if t["id"] == name)


def node(g, name):
    return next(n for n in g["nodes"] if n["id"] == name)


def setter(obj_fn, key, value):
    def fn(g):
        obj_fn(g)[key] = value
    return fn


good_text = json.dumps(GOOD, indent=1)

# Syntax.
graph_case("empty.json", raw="", message="malformed JSON")
graph_case("truncated.json", raw=good_text[: len(good_text) // 2], message="malformed JSON")
graph_case("trailing_garbage.json", raw=good_text + "}", message="malformed JSON")
graph_case("binary_garbage.json", raw=bytes(range(256)), message="malformed JSON")
graph_case("utf16.json", raw=good_text.encode("utf-16"), message="malformed JSON")
graph_case("huge_exponent.json", raw=good_text.replace('"flops": 1000', '"flops": 1e400', 1),
           message="number overflow")
graph_case("deep_nesting.json", raw="[" * 100000 + "]" * 100000, message="nests deeper than 64")
graph_case("deep_nesting_in_field.json",
           raw=good_text.replace('"optimizer": "sgd"', '"optimizer": "sgd", "x": ' + "[" * 70 + "]" * 70),
           message="nests deeper than 64")
graph_case("depth_flag.json", GOOD, message="nests deeper than 2", extra_args=["--max-depth", "2"])

# Header and top-level types.
graph_case("not_object.json", [1, 2], message="top level must be a JSON object, got array")
graph_case("wrong_format.json", edit(setter(lambda g: g, "format", "onnx")),
           message='"format" must be "ckptplan.graph"')
graph_case("version2.json", edit(setter(lambda g: g, "version", 2)), message='"version" must be 1, got 2')
graph_case("tensors_not_array.json", edit(setter(lambda g: g, "tensors", {"x": 1})),
           message='"tensors" must be an array')
graph_case("nodes_missing.json", edit(lambda g: g.pop("nodes")), message='"nodes" must be an array')
graph_case("training_not_object.json", edit(setter(lambda g: g, "training", "adam")),
           message='"training" must be an object')

# Tensors.
graph_case("tensor_not_object.json", edit(lambda g: g["tensors"].append(5)),
           message="tensors[6] must be an object, got number")
graph_case("missing_tensor_id.json", edit(lambda g: tensor(g, "da").pop("id")),
           message='tensors[4]: missing "id"')
graph_case("duplicate_tensor_id.json", edit(lambda g: g["tensors"].append({"id": "a", "bytes": 1})),
           message="tensor 'a': duplicate tensor id")
graph_case("unknown_kind.json", edit(setter(lambda g: tensor(g, "w"), "kind", "weight")),
           message="tensor 'w': unknown kind 'weight'")
graph_case("unknown_dtype.json", edit(setter(lambda g: tensor(g, "a"), "dtype", "float128")),
           message="tensor 'a': unknown dtype 'float128'")
graph_case("shape_without_dtype.json", edit(lambda g: tensor(g, "a").pop("dtype")),
           message="tensor 'a': \"shape\" needs a \"dtype\"")
graph_case("no_size.json", edit(lambda g: tensor(g, "da").pop("bytes")),
           message="tensor 'da': needs \"bytes\" or \"shape\"")
graph_case("negative_dim.json", edit(setter(lambda g: tensor(g, "a"), "shape", [16, -1])),
           message="tensor 'a': shape dims must be non-negative integers, got -1")
graph_case("fractional_dim.json", edit(setter(lambda g: tensor(g, "a"), "shape", [2.5])),
           message="shape dims must be non-negative integers, got 2.5")
graph_case("shape_not_array.json", edit(setter(lambda g: tensor(g, "a"), "shape", "16x16")),
           message="shape must be an array of integers, got string")
graph_case("shape_overflow.json", edit(setter(lambda g: tensor(g, "a"), "shape", [1 << 32, 1 << 32])),
           message="overflows 64 bits")
graph_case("shape_bytes_overflow.json", edit(setter(lambda g: tensor(g, "a"), "shape", [1 << 62])),
           message="x float32 overflows 64 bits")
graph_case("huge_dims.json", edit(setter(lambda g: tensor(g, "a"), "shape", [1 << 30, 1 << 30])),
           message="add up to more than the limit of 1.0 EiB")
graph_case("too_many_dims.json", edit(setter(lambda g: tensor(g, "a"), "shape", [1] * 100)),
           message="shape has 100 dims, over the limit of 64")
graph_case("bytes_shape_disagree.json", edit(setter(lambda g: tensor(g, "a"), "bytes", 7)),
           message="bytes 7 disagrees with shape [16,16] x float32 = 1024")
graph_case("negative_bytes.json", edit(setter(lambda g: tensor(g, "da"), "bytes", -5)),
           message="tensor 'da': bytes must be an integer in [0, 2^63-1], got -5")
graph_case("bytes_string.json", edit(setter(lambda g: tensor(g, "da"), "bytes", "1GiB")),
           message='bytes must be an integer in [0, 2^63-1], got "1GiB"')
graph_case("bytes_over_int64.json", edit(setter(lambda g: tensor(g, "da"), "bytes", (1 << 64) - 1)),
           message="got 18446744073709551615")
graph_case("total_bytes_overflow.json",
           edit(lambda g: [tensor(g, n).__setitem__("bytes", (1 << 63) - 1) for n in ("x", "da")]),
           message="add up to more than")
graph_case("dangling_alias.json", edit(setter(lambda g: tensor(g, "da"), "alias_of", "nope")),
           message="tensor 'da': alias_of names unknown tensor 'nope'")
graph_case("self_alias.json", edit(setter(lambda g: tensor(g, "w"), "alias_of", "w")),
           message="tensor 'w' aliases itself")
graph_case("alias_cycle.json",
           edit(lambda g: (g["tensors"].append({"id": "w2", "kind": "parameter", "alias_of": "w"}),
                           tensor(g, "w").__setitem__("alias_of", "w2"))),
           message="is on an alias_of cycle")
graph_case("alias_not_input.json", edit(setter(lambda g: tensor(g, "da"), "alias_of", "x")),
           message="tensor 'da' aliases tensor 'x', which is not an input of its producer 'lb'")

# Nodes.
graph_case("duplicate_node_id.json", edit(lambda g: node(g, "l").__setitem__("id", "f")),
           message="node 'f': duplicate node id")
graph_case("missing_op.json", edit(lambda g: node(g, "l").pop("op")), message="node 'l': missing \"op\"")
graph_case("bad_phase.json", edit(setter(lambda g: node(g, "l"), "phase", "sideways")),
           message="node 'l': \"phase\" must be forward, backward or optimizer, got \"sideways\"")
graph_case("dangling_input.json", edit(lambda g: node(g, "l")["inputs"].append("nope")),
           message="node 'l': inputs names unknown tensor 'nope'")
graph_case("dangling_output.json", edit(lambda g: node(g, "l")["outputs"].append("nope")),
           message="node 'l': outputs names unknown tensor 'nope'")
graph_case("inputs_not_array.json", edit(setter(lambda g: node(g, "l"), "inputs", "a")),
           message="node 'l': \"inputs\" must be an array of tensor ids")
graph_case("input_entry_number.json", edit(setter(lambda g: node(g, "l"), "inputs", [3])),
           message="node 'l': \"inputs\" entries must be strings, got 3")
graph_case("cycle.json", edit(lambda g: node(g, "f")["inputs"].append("loss")),
           message="node 'f' (forward) reads tensor 'loss' before node 'l' produces it")
# fb does not read a: a second producer, not an in-place write.
graph_case("two_producers.json", edit(lambda g: node(g, "fb")["outputs"].append("a")),
           message="tensor 'a' is produced by both node 'f' and node 'fb'")
graph_case("unproduced_activation.json", edit(lambda g: node(g, "f")["outputs"].remove("a")),
           message="node 'l' reads tensor 'a' of kind activation that no node produces")
# An in-place write of a tensor no node has made yet is a read before production.
graph_case("in_place_before_made.json",
           edit(lambda g: (node(g, "f")["inputs"].append("da"), node(g, "f")["outputs"].append("da"))),
           message="node 'f' (forward) reads tensor 'da' before node 'f' produces it")
graph_case("negative_flops.json", edit(setter(lambda g: node(g, "f"), "flops", -3)),
           message="node 'f': flops must be finite and >= 0, got -3")
graph_case("flops_string.json", edit(setter(lambda g: node(g, "f"), "flops", "1e9")),
           message="node 'f': flops must be a number, got string")
graph_case("huge_cost.json", edit(setter(lambda g: node(g, "f"), "time_us", 1e300)),
           message="node 'f': cost 1e+300 is over the limit of 1e+30")
graph_case("negative_workspace.json", edit(setter(lambda g: node(g, "f"), "workspace_bytes", -1)),
           message="node 'f': workspace_bytes must be an integer in [0, 2^63-1], got -1")
graph_case("too_many_nodes.json", GOOD, message="4 nodes is over the limit of 3 (raise it with --max-nodes)",
           extra_args=["--max-nodes", "3"])
graph_case("too_many_tensors.json", GOOD,
           message="6 tensors is over the limit of 5 (raise it with --max-tensors)",
           extra_args=["--max-tensors", "5"])

# Training state.
graph_case("unknown_optimizer.json", edit(setter(lambda g: g["training"], "optimizer", "lion")),
           message="training: unknown optimizer 'lion'")
graph_case("unknown_parameter_dtype.json",
           edit(setter(lambda g: g["training"], "parameter_dtype", "float4")),
           message="training: unknown parameter_dtype 'float4'")
graph_case("parameter_count_overflow.json",
           edit(lambda g: g["training"].update(optimizer="adam", parameter_count=(1 << 63) - 1)),
           message="add up to more than")
graph_case("optimizer_bytes_inf.json",
           raw=good_text.replace('"optimizer": "sgd"', '"optimizer": "sgd", "optimizer_bytes_per_param": 1e999'),
           message="number overflow")

# Not a budget problem but no output either: the plan cannot fit.
graph_case("infeasible_budget.json", GOOD, exit_code=INFEASIBLE, message="lower bound",
           budget="1KiB")


# ONNX: bytes that are not a model, behind an .onnx name.
def onnx_case(name, raw, message):
    path = os.path.join("onnx", name)
    with open(os.path.join(ROOT, path), "wb") as f:
        f.write(raw)
    cases.append({"name": name, "args": ["plan", "{dir}/" + path, "--budget", "1GiB", "-o", "{out}"],
                  "exit": BAD_INPUT, "message": message})


onnx_case("json_named.onnx", good_text.encode(), "json_named.onnx: not a valid ONNX model")
onnx_case("empty.onnx", b"", "empty.onnx: not an ONNX model (ir_version 0")
onnx_case("random_bytes.onnx", bytes((i * 37 + 11) % 256 for i in range(512)),
          "random_bytes.onnx: not a valid ONNX model")
# A ModelProto prefix cut inside a length-delimited field: ir_version 8, then
# graph (field 7) claiming 1000 bytes but holding 3.
onnx_case("truncated.onnx", bytes([0x08, 0x08, 0x3A, 0xE8, 0x07, 0x0A, 0x01, 0x78]),
          "truncated.onnx: not a valid ONNX model")
SEED = os.path.join(ROOT, "..", "fuzz", "seeds", "onnx", "mlp_stripped.onnx")
with open(SEED, "rb") as f:
    mlp = f.read()
onnx_case("truncated_model.onnx", mlp[: len(mlp) // 2], "truncated_model.onnx: not a valid ONNX model")


def onnx_edit(name, fn, message, extra_args=()):
    import onnx  # python3-onnx, installed by scripts/setup.sh --tests
    model = onnx.load_from_string(mlp)
    fn(model)
    onnx_case(name, model.SerializeToString(), message)
    cases[-1]["args"] += list(extra_args)


def batch(value):
    def fn(model):
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = value
    return fn


onnx_edit("huge_batch.onnx", batch(1 << 62), "add up to more than the limit of 1.0 EiB")
onnx_edit("no_nodes.onnx", lambda m: m.graph.ClearField("node"), "no_nodes.onnx: not an ONNX model")
onnx_case("too_many_onnx_nodes.onnx", mlp, "ONNX nodes is over the limit of 3 (raise it with --max-nodes)")
cases[-1]["args"] += ["--max-nodes", "3"]


# Plan files for `simulate --plan`, against a valid graph.
def plan_case(name, plan=None, message="", raw=None, exit_code=BAD_INPUT):
    path = os.path.join("plans", name)
    with open(os.path.join(ROOT, path), "wb") as f:
        f.write(raw.encode() if raw is not None else (json.dumps(plan, indent=1) + "\n").encode())
    cases.append({"name": name, "args": ["simulate", "{dir}/graphs/valid.json", "--plan", "{dir}/" + path,
                                         "--timeline", "{out}"],
                  "exit": exit_code, "message": message})


with open(os.path.join(ROOT, "graphs", "valid.json"), "w") as f:
    f.write(json.dumps(GOOD, indent=1) + "\n")
PLAN = {"format": "ckptplan.plan", "version": 1, "graph": {"file": "valid.json", "sha256": ""},
        "budget_bytes": 4096, "reserve_bytes": 0, "predicted_peak_bytes": 3000,
        "decisions": [{"tensor": "a", "action": "recompute"}]}


def plan_edit(fn):
    p = copy.deepcopy(PLAN)
    fn(p)
    return p


plan_text = json.dumps(PLAN)
plan_case("plan_truncated.json", raw=plan_text[:40], message="malformed JSON")
plan_case("plan_wrong_format.json", plan_edit(lambda p: p.update(format="ckptplan.graph")),
          message="not a ckptplan plan")
plan_case("plan_not_object.json", raw="[]", message="not a ckptplan plan")
plan_case("plan_version.json", plan_edit(lambda p: p.update(version=7)), message='"version" must be 1, got 7')
plan_case("plan_unknown_tensor.json", plan_edit(lambda p: p["decisions"].append({"tensor": "zzz", "action": "save"})),
          message="decisions[1]: unknown tensor 'zzz'")
plan_case("plan_not_candidate.json", plan_edit(lambda p: p["decisions"].append({"tensor": "x", "action": "save"})),
          message="decisions[1]: tensor 'x' is not a forward tensor the backward reads")
plan_case("plan_bad_action.json", plan_edit(lambda p: p["decisions"][0].update(action="drop")),
          message="\"action\" must be save, recompute or offload, got 'drop'")
plan_case("plan_action_number.json", plan_edit(lambda p: p["decisions"][0].update(action=5)),
          message="\"action\" must be save, recompute or offload, got ''")
plan_case("plan_decision_not_object.json", plan_edit(lambda p: p["decisions"].append("a")),
          message='decisions[1]: needs a "tensor" string')
plan_case("plan_no_decisions.json", plan_edit(lambda p: p.pop("decisions")),
          message='"decisions" must be an array')
plan_case("plan_negative_budget.json", plan_edit(lambda p: p.update(budget_bytes=-1)),
          message='"budget_bytes" must be a non-negative integer')
plan_case("plan_huge_reserve.json", plan_edit(lambda p: p.update(reserve_bytes=(1 << 63) - 1)),
          message='"reserve_bytes" 9223372036854775807 is over the limit of 4611686018427387904')
plan_case("plan_deep.json", raw='{"format": "ckptplan.plan", "x": ' + "[" * 1000 + "]" * 1000 + "}",
          message="nests deeper than 64")
plan_case("plan_huge_exponent.json", raw=plan_text.replace('"budget_bytes": 4096', '"budget_bytes": 4e4096'),
          message="number overflow")
cases.append({"name": "plan_missing_file", "args": ["simulate", "{dir}/graphs/valid.json", "--plan",
                                                    "{dir}/plans/does_not_exist.json", "--timeline", "{out}"],
              "exit": IO, "message": "does_not_exist.json: cannot open file for reading"})


# Flag values: sizes.
def size_case(name, flag, value, message, exit_code=USAGE):
    sizes = [flag, value] if flag == "--budget" else ["--budget", "1GiB", flag, value]
    cases.append({"name": name, "args": ["plan", "{dir}/graphs/valid.json", *sizes, "-o", "{out}"],
                  "exit": exit_code, "message": message})


size_case("budget_negative", "--budget", "-1GiB", "--budget: cannot parse size '-1GiB': size is negative")
size_case("budget_unknown_unit", "--budget", "40XB", "unknown unit 'XB'")
size_case("budget_too_large", "--budget", "99999999999PiB", "larger than 2^63-1 bytes")
size_case("budget_no_number", "--budget", "GiB", "no number")
size_case("budget_empty", "--budget", "", "no number")
size_case("budget_decimals", "--budget", "1.0000000000000000001GiB", "too many decimal places")
size_case("budget_many_digits", "--budget", "9" * 400, "number is too large")
size_case("reserve_over_limit", "--reserve", "8000PiB", "--reserve: reserve 7.8 EiB is over the limit of 4.0 EiB")
cases.append({"name": "missing_graph", "args": ["plan", "{dir}/graphs/does_not_exist.json", "--budget", "1GiB",
                                                "-o", "{out}"],
              "exit": IO, "message": "does_not_exist.json: cannot open file for reading"})

# `check`: baseline and config files.
def check_case(name, sub, raw, args, message, exit_code=BAD_INPUT):
    path = os.path.join(sub, name)
    with open(os.path.join(ROOT, path), "w") as f:
        f.write(raw)
    cases.append({"name": name, "args": ["check", *[a.replace("{file}", "{dir}/" + path) for a in args],
                                         "--junit", "{out}"],
                  "exit": exit_code, "message": message})


BASELINE_ARGS = ["{dir}/graphs/valid.json", "--budget", "1GiB", "--baseline", "{file}"]
check_case("baseline_truncated.json", "baselines", '{"format": "ckptplan.baseline", "version": 1, "gra',
           BASELINE_ARGS, "corrupt baseline: malformed JSON")
check_case("baseline_deep.json", "baselines", '{"graphs": ' + "[" * 5000 + "]" * 5000 + "}",
           BASELINE_ARGS, "nests deeper than 64")
check_case("baseline_huge_exponent.json", "baselines",
           '{"format": "ckptplan.baseline", "version": 1, "graphs": {"x": {"peak_bytes": 1e999}}}',
           BASELINE_ARGS, "corrupt baseline: malformed JSON")
check_case("baseline_not_object.json", "baselines", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
           BASELINE_ARGS, "top level must be a JSON object")
CONFIG_HEAD = '{"format": "ckptplan.check", "version": 1, '
check_case("config_huge_reserve.json", "configs",
           CONFIG_HEAD + '"defaults": {"budget": "1GiB", "reserve": "8000PiB"}, "graphs": [{"graph": "../graphs/valid.json"}]}',
           ["--config", "{file}"], "reserve: reserve 7.8 EiB is over the limit of 4.0 EiB", exit_code=USAGE)
check_case("config_deep.json", "configs", CONFIG_HEAD + '"graphs": ' + "[" * 100 + "]" * 100 + "}",
           ["--config", "{file}"], "nests deeper than 64")
check_case("config_huge_exponent.json", "configs",
           CONFIG_HEAD + '"defaults": {"tolerance": 1e400}, "graphs": [{"graph": "../graphs/valid.json"}]}',
           ["--config", "{file}"], "malformed JSON")
check_case("config_truncated.json", "configs", CONFIG_HEAD + '"graphs": [{"graph": "../gr',
           ["--config", "{file}"], "malformed JSON")

# Crash inputs the fuzzers found, kept as regression cases (see docs/hardening.md).
EXTRA = [
    # onnx_fuzzer: a Mul node with one input made shape inference read past
    # its inputs (heap-buffer-overflow in onnx_shapes.cc Infer); fixed.
    {"name": "fuzz_mul_one_input.onnx",
     "args": ["plan", "{dir}/onnx/fuzz_mul_one_input.onnx", "--budget", "1GiB", "-o", "{out}"],
     "exit": BAD_INPUT, "message": "op Mul): shape unknown rank"},
    # onnx_fuzzer: an unknown default-domain op (":ather") made libonnx's
    # InferShapes dereference null (SEGV); such models now skip it.
    {"name": "fuzz_unknown_op_segv.onnx",
     "args": ["plan", "{dir}/onnx/fuzz_unknown_op_segv.onnx", "--budget", "1GiB", "-o", "{out}"],
     "exit": BAD_INPUT, "message": "op :ather is unknown to ONNX"},
    # onnx_fuzzer: a Transpose whose perm names an axis past the input's rank
    # read freed memory (heap-use-after-free); now the shape stays unknown.
    {"name": "fuzz_transpose_perm_uaf.onnx",
     "args": ["plan", "{dir}/onnx/fuzz_transpose_perm_uaf.onnx", "--budget", "1GiB", "-o", "{out}"],
     "exit": BAD_INPUT, "message": "(output 0 of node '/h.0/attn/c_attn/Transpose', op Transpose): shape unknown rank"},
    # onnx_fuzzer: an Unsqueeze rewired to another dim made a Reshape change
    # the element count, a later Add failed to broadcast and stayed untyped,
    # and libonnx 1.12's data propagation for the next Shape dereferenced
    # that missing type (SEGV in InferShapes); inputs of data-propagating
    # nodes now get an empty type first, and the Add is reported.
    {"name": "fuzz_untyped_shape_input_segv.onnx",
     "args": ["plan", "{dir}/onnx/fuzz_untyped_shape_input_segv.onnx", "--budget", "1GiB", "-o", "{out}"],
     "exit": BAD_INPUT, "message": "tensor '/h.0/Add_output_0' (output 0 of node '/h.0/Add', op Add): shape unknown rank"},
]
cases.extend(EXTRA)

with open(os.path.join(ROOT, "manifest.json"), "w") as f:
    json.dump({"about": "Bad inputs: ckptplan ARGS must exit with EXIT, print MESSAGE on stderr and "
                        "leave no file at {out}. {dir} is tests/bad_inputs. Written by "
                        "scripts/make_bad_inputs.py.",
               "cases": cases}, f, indent=1)
    f.write("\n")
print(f"wrote {len(cases)} cases to {ROOT}")
