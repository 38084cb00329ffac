#!/usr/bin/python3
"""Writes tests/graphs/hostile_names.{json,onnx}: small valid training graphs
whose tensor, node, op and scope names hold a newline and a GitHub workflow
command ("\\n::error::x"), a carriage return, a terminal escape ("\\x1b[31m"), a
bell ("\\x07"), DEL, a C1 control and (ONNX only: JSON text must be UTF-8)
bytes that are not UTF-8. tests/cli/hostile_names_test.cc runs every
subcommand and format over them.

Run from the repository root: /usr/bin/python3 scripts/make_hostile_names.py
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "graphs")

INJECT = "h\n::error::x"
CR = "r\rover"
ESC = "\x1b[31mred"
BEL = "bell\x07"
DEL_C1 = "del\x7f\u009b2J"


def json_graph():
    tensors = [
        {"id": "x" + ESC, "bytes": 256, "kind": "input"},
        {"id": "w" + BEL, "bytes": 1024, "kind": "parameter"},
        {"id": INJECT, "bytes": 512},
        {"id": CR, "bytes": 512},
        {"id": "loss" + DEL_C1, "bytes": 4},
        {"id": "d" + INJECT, "bytes": 512},
        {"id": "dw\n::warning::y", "bytes": 1024, "kind": "gradient"},
        {"id": "m" + ESC, "bytes": 1024, "kind": "optimizer_state"},
    ]
    nodes = [
        {"id": "fc\n::error::node", "op": "matmul\x1b]0;title\x07", "phase": "forward",
         "scope": "blk\n::error::scope", "inputs": ["x" + ESC, "w" + BEL], "outputs": [INJECT],
         "flops": 1000},
        {"id": "relu" + CR, "op": "relu", "phase": "forward", "inputs": [INJECT],
         "outputs": [CR], "flops": 10},
        {"id": "sum" + DEL_C1, "op": "sum", "phase": "forward", "inputs": [CR],
         "outputs": ["loss" + DEL_C1], "flops": 10},
        {"id": "sum_bwd", "op": "sum_bwd", "phase": "backward", "inputs": ["loss" + DEL_C1, CR],
         "outputs": ["d" + INJECT], "flops": 10},
        {"id": "fc_bwd" + BEL, "op": "matmul_bwd", "phase": "backward",
         "inputs": ["d" + INJECT, INJECT, "x" + ESC], "outputs": ["dw\n::warning::y"],
         "flops": 2000},
        # In place: the optimizer writes the moment and the parameter.
        {"id": "adam\n::error::m", "op": "lerp_", "phase": "optimizer",
         "inputs": ["m" + ESC, "dw\n::warning::y"], "outputs": ["m" + ESC], "flops": 10},
        {"id": "adam\n::error::w", "op": "sub_", "phase": "optimizer",
         "inputs": ["w" + BEL, "m" + ESC], "outputs": ["w" + BEL], "flops": 10},
    ]
    return {"format": "ckptplan.graph", "version": 1, "training": {"optimizer": "adam"},
            "tensors": tensors, "nodes": nodes}


# Placeholders of the same length as the invalid UTF-8 they stand for: the
# protobuf library will not write such strings, so the bytes are patched in.
BAD = [(b"BADUTF8A", b"bad\xff\xfe\xc3(A"), (b"BADUTF8B", b"\xed\xa0\x80bad_B")]


def onnx_model():
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w" + BEL)
    b1 = numpy_helper.from_array(np.zeros(32, np.float32), "BADUTF8A")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2" + ESC)
    nodes = [
        helper.make_node("MatMul", ["x" + ESC, "w" + BEL], [INJECT], name="fc\n::error::node"),
        helper.make_node("Add", [INJECT, "BADUTF8A"], ["BADUTF8B"], name="add" + CR),
        helper.make_node("Relu", ["BADUTF8B"], [CR], name="relu" + DEL_C1),
        helper.make_node("MatMul", [CR, "w2" + ESC], ["out\n::error::y"], name="BADUTF8B"),
    ]
    graph = helper.make_graph(
        nodes, "hostile\n::error::graph",
        [helper.make_tensor_value_info("x" + ESC, TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("out\n::error::y", TensorProto.FLOAT, [4, 8])],
        initializer=[w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    for placeholder, bad in BAD:
        assert len(placeholder) == len(bad)
        data = data.replace(placeholder, bad)
    return data


def main():
    with open(os.path.join(HERE, "hostile_names.json"), "w") as f:
        f.write(json.dumps(json_graph(), indent=1) + "\n")
    with open(os.path.join(HERE, "hostile_names.onnx"), "wb") as f:
        f.write(onnx_model())
    print("wrote tests/graphs/hostile_names.json and hostile_names.onnx")


if __name__ == "__main__":
    main()
