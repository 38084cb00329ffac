#!/usr/bin/env python3
"""Writes the hand-made JSON sample graphs in sample_graphs/.

Each graph is small enough that its memory can be worked out by hand; the
arithmetic is in tests/cli/samples_test.cc. Run from the repository root:
    python3 scripts/make_sample_graphs.py
"""
import json
import os

MiB = 1 << 20


class Graph:
    def __init__(self, optimizer):
        self.tensors, self.nodes = [], []
        self.training = {"optimizer": optimizer}

    def tensor(self, name, kind="activation", shape=None, dtype="float32", nbytes=None, alias_of=None):
        entry = {"id": name}
        if alias_of:
            entry["alias_of"] = alias_of
        if shape is not None:
            entry["shape"], entry["dtype"] = shape, dtype
        elif nbytes is not None:
            entry["bytes"] = nbytes
        entry["kind"] = kind
        self.tensors.append(entry)
        return name

    def node(self, name, op, phase, inputs, outputs, flops, scope=None, workspace=0):
        entry = {"id": name, "op": op, "phase": phase, "inputs": inputs, "outputs": outputs,
                 "flops": flops}
        if workspace:
            entry["workspace_bytes"] = workspace
        if scope:
            entry["scope"] = scope
        self.nodes.append(entry)

    def write(self, path, description):
        doc = {"format": "ckptplan.graph", "version": 1, "description": description,
               "training": self.training, "tensors": self.tensors, "nodes": self.nodes}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


def mlp():
    # y = relu(x @ w1) @ w2, MSE loss; float32; batch 1024.
    g = Graph("adamw")
    g.tensor("x", "input", [1024, 1024])             # 4 MiB
    g.tensor("w1", "parameter", [1024, 2048])        # 8 MiB, 2^21 params
    g.tensor("w2", "parameter", [2048, 1024])        # 8 MiB, 2^21 params
    g.tensor("h1", shape=[1024, 2048])               # 8 MiB
    g.tensor("a1", shape=[1024, 2048])               # 8 MiB
    g.tensor("y", shape=[1024, 1024])                # 4 MiB
    g.tensor("loss", shape=[], dtype="float32")      # 4 B
    g.tensor("dy", shape=[1024, 1024])
    g.tensor("da1", shape=[1024, 2048])
    g.tensor("dh1", shape=[1024, 2048])
    g.tensor("dw1", "gradient", [1024, 2048])
    g.tensor("dw2", "gradient", [2048, 1024])
    mm = 2 * 1024 * 1024 * 2048
    g.node("fc1", "matmul", "forward", ["x", "w1"], ["h1"], mm, "fc1")
    g.node("relu", "relu", "forward", ["h1"], ["a1"], 1024 * 2048, "act")
    g.node("fc2", "matmul", "forward", ["a1", "w2"], ["y"], mm, "fc2")
    g.node("mse", "mse_loss", "forward", ["y"], ["loss"], 3 * 1024 * 1024, "loss")
    g.node("mse_bwd", "mse_loss_bwd", "backward", ["y"], ["dy"], 2 * 1024 * 1024, "loss")
    g.node("fc2_bwd", "matmul_bwd", "backward", ["dy", "a1", "w2"], ["da1", "dw2"], 2 * mm, "fc2")
    g.node("relu_bwd", "relu_bwd", "backward", ["da1", "a1"], ["dh1"], 1024 * 2048, "act")
    g.node("fc1_bwd", "matmul_bwd", "backward", ["dh1", "x", "w1"], ["dw1"], mm, "fc1")
    g.node("adamw", "adamw", "optimizer", ["w1", "w2", "dw1", "dw2"], [], 10 * 2 * 2 ** 21)
    g.write("sample_graphs/mlp.json", "2-layer MLP, float32, AdamW; memory worked out in tests/cli/samples_test.cc")


def diamond():
    # a = f(x); b = g(a); c = h(a); d = b + c + a (skip); loss = sum(d).
    # 1 MiB per activation, parameters 1 KiB each, SGD (no optimizer state).
    g = Graph("sgd")
    g.tensor("x", "input", nbytes=MiB)
    for w in ("wf", "wg", "wh"):
        g.tensor(w, "parameter", nbytes=1024)
    for t in ("a", "b", "c", "d"):
        g.tensor(t, nbytes=MiB)
    g.tensor("loss", nbytes=4)
    for t in ("dd", "db", "dc", "da_b", "da_c", "da"):
        g.tensor(t, nbytes=MiB)
    for w in ("wf", "wg", "wh"):
        g.tensor("d" + w, "gradient", nbytes=1024)
    g.node("f", "matmul", "forward", ["x", "wf"], ["a"], 1000)
    g.node("g", "matmul", "forward", ["a", "wg"], ["b"], 1000)
    g.node("h", "gelu", "forward", ["a", "wh"], ["c"], 10)
    g.node("join", "add", "forward", ["a", "b", "c"], ["d"], 10)
    g.node("sum", "sum", "forward", ["d"], ["loss"], 10)
    g.node("sum_bwd", "sum_bwd", "backward", ["loss"], ["dd"], 10)
    g.node("h_bwd", "gelu_bwd", "backward", ["dd", "a", "c", "wh"], ["da_c", "dwh"], 20)
    g.node("g_bwd", "matmul_bwd", "backward", ["dd", "a", "wg"], ["da_b", "dwg"], 2000)
    g.node("acc_a", "add", "backward", ["dd", "da_b", "da_c"], ["da"], 10)
    g.node("f_bwd", "matmul_bwd", "backward", ["da", "x", "wf"], ["dwf"], 2000)
    g.node("sgd", "sgd", "optimizer", ["wf", "wg", "wh", "dwf", "dwg", "dwh"], [], 10)
    g.write("sample_graphs/diamond.json", "diamond with a skip connection, SGD")


def transformer_block():
    # One pre-LN GPT block: batch 4, seq 512, hidden 1024, 16 heads; bf16
    # activations, fp32 parameters, AdamW. Saves what PyTorch autograd saves.
    b, s, h, a = 4, 512, 1024, 16
    g = Graph("adamw")
    act, scores, bf = [b, s, h], [b, a, s, s], "bfloat16"
    g.tensor("x", "input", act, bf)
    params = {"ln1.w": [2 * h], "attn.w_qkv": [h, 3 * h], "attn.w_o": [h, h], "ln2.w": [2 * h],
              "mlp.w_fc": [h, 4 * h], "mlp.w_proj": [4 * h, h]}
    for name, shape in params.items():
        g.tensor(name, "parameter", shape)
    fwd = [  # (node, op, inputs, outputs with shapes/dtypes, flops, scope)
        ("ln1", "layer_norm", ["x", "ln1.w"], [("n1", act, bf), ("n1.stats", [b, s, 2], "float32")], 5 * b * s * h, "ln1"),
        ("qkv", "matmul", ["n1", "attn.w_qkv"], [("qkv", [b, s, 3 * h], bf)], 6 * b * s * h * h, "attn"),
        ("split", "split", ["qkv"], [("q", act, bf, "qkv"), ("k", act, bf, "qkv"), ("v", act, bf, "qkv")], 0, "attn"),
        ("qk", "bmm", ["q", "k"], [("scores", scores, bf)], 2 * b * s * s * h, "attn"),
        ("softmax", "softmax", ["scores"], [("probs", scores, bf)], 5 * b * a * s * s, "attn"),
        ("attn_drop", "dropout", ["probs"], [("probs_d", scores, bf), ("mask1", scores, "bool")], 2 * b * a * s * s, "attn"),
        ("av", "bmm", ["probs_d", "v"], [("ctx", act, bf)], 2 * b * s * s * h, "attn"),
        ("proj", "matmul", ["ctx", "attn.w_o"], [("o", act, bf)], 2 * b * s * h * h, "attn"),
        ("resid_drop1", "dropout", ["o"], [("o_d", act, bf), ("mask2", act, "bool")], 2 * b * s * h, "attn"),
        ("add1", "add", ["x", "o_d"], [("r1", act, bf)], b * s * h, "attn"),
        ("ln2", "layer_norm", ["r1", "ln2.w"], [("n2", act, bf), ("n2.stats", [b, s, 2], "float32")], 5 * b * s * h, "ln2"),
        ("fc", "matmul", ["n2", "mlp.w_fc"], [("f", [b, s, 4 * h], bf)], 8 * b * s * h * h, "mlp"),
        ("gelu", "gelu", ["f"], [("gl", [b, s, 4 * h], bf)], 8 * 4 * b * s * h, "mlp"),
        ("fc_proj", "matmul", ["gl", "mlp.w_proj"], [("m", act, bf)], 8 * b * s * h * h, "mlp"),
        ("resid_drop2", "dropout", ["m"], [("m_d", act, bf), ("mask3", act, "bool")], 2 * b * s * h, "mlp"),
        ("add2", "add", ["r1", "m_d"], [("out", act, bf)], b * s * h, "mlp"),
        ("loss", "sum", ["out"], [("loss", [], "float32")], b * s * h, "loss"),
    ]
    for node, op, inputs, outputs, flops, scope in fwd:
        for out in outputs:
            g.tensor(out[0], shape=out[1], dtype=out[2], alias_of=out[3] if len(out) > 3 else None)
        g.node(node, op, "forward", inputs, [o[0] for o in outputs], flops, scope)
    bwd = [  # (node, op, inputs, activation-gradient outputs with shapes, param grad, flops, scope)
        ("loss_bwd", "sum_bwd", ["loss"], [("d_out", act)], None, b * s * h, "loss"),
        ("resid_drop2_bwd", "dropout_bwd", ["d_out", "mask3"], [("d_m", act)], None, 2 * b * s * h, "mlp"),
        ("fc_proj_bwd", "matmul_bwd", ["d_m", "gl", "mlp.w_proj"], [("d_gl", [b, s, 4 * h])], "mlp.w_proj", 16 * b * s * h * h, "mlp"),
        ("gelu_bwd", "gelu_bwd", ["d_gl", "f"], [("d_f", [b, s, 4 * h])], None, 16 * b * s * h, "mlp"),
        ("fc_bwd", "matmul_bwd", ["d_f", "n2", "mlp.w_fc"], [("d_n2", act)], "mlp.w_fc", 16 * b * s * h * h, "mlp"),
        ("ln2_bwd", "layer_norm_bwd", ["d_n2", "r1", "n2.stats", "ln2.w"], [("d_r1_ln", act)], "ln2.w", 8 * b * s * h, "ln2"),
        ("add2_bwd", "add", ["d_out", "d_r1_ln"], [("d_r1", act)], None, b * s * h, "mlp"),
        ("resid_drop1_bwd", "dropout_bwd", ["d_r1", "mask2"], [("d_o", act)], None, 2 * b * s * h, "attn"),
        ("proj_bwd", "matmul_bwd", ["d_o", "ctx", "attn.w_o"], [("d_ctx", act)], "attn.w_o", 4 * b * s * h * h, "attn"),
        ("av_bwd", "bmm_bwd", ["d_ctx", "probs_d", "v"], [("d_probs_d", scores), ("d_v", act)], None, 4 * b * s * s * h, "attn"),
        ("attn_drop_bwd", "dropout_bwd", ["d_probs_d", "mask1"], [("d_probs", scores)], None, 2 * b * a * s * s, "attn"),
        ("softmax_bwd", "softmax_bwd", ["d_probs", "probs"], [("d_scores", scores)], None, 5 * b * a * s * s, "attn"),
        ("qk_bwd", "bmm_bwd", ["d_scores", "q", "k"], [("d_q", act), ("d_k", act)], None, 4 * b * s * s * h, "attn"),
        ("split_bwd", "cat", ["d_q", "d_k", "d_v"], [("d_qkv", [b, s, 3 * h])], None, 3 * b * s * h, "attn"),
        ("qkv_bwd", "matmul_bwd", ["d_qkv", "n1", "attn.w_qkv"], [("d_n1", act)], "attn.w_qkv", 12 * b * s * h * h, "attn"),
        ("ln1_bwd", "layer_norm_bwd", ["d_n1", "x", "n1.stats", "ln1.w"], [], "ln1.w", 8 * b * s * h, "ln1"),
    ]
    for node, op, inputs, outputs, grad_of, flops, scope in bwd:
        names = []
        for name, shape in outputs:
            g.tensor(name, shape=shape, dtype=bf)
            names.append(name)
        if grad_of:
            g.tensor("grad." + grad_of, "gradient", params[grad_of])
            names.append("grad." + grad_of)
        g.node(node, op, "backward", inputs, names, flops, scope)
    g.node("adamw", "adamw", "optimizer", list(params) + ["grad." + p for p in params], [],
           10 * sum(1 for _ in params), workspace=4 * 4 * h * h)
    g.write("sample_graphs/transformer_block.json",
            "one pre-LN GPT block (b=4, s=512, h=1024, 16 heads), bf16 activations, AdamW")


if __name__ == "__main__":
    os.makedirs("sample_graphs", exist_ok=True)
    mlp()
    diamond()
    transformer_block()
