#!/usr/bin/python3
"""Measures what eager PyTorch keeps for backward in the ONNX samples' models.

Run: /usr/bin/python3 scripts/measure_saved_torch.py  (writes tests/torch/saved_torch.json)

One fp32 training step on CPU per model, under
torch.autograd.graph.saved_tensors_hooks: every tensor autograd saves is
recorded by its storage, and unique storages are summed, leaving out
parameters, buffers and the model inputs (resident; ckptplan counts them as
such). Dropout runs through torch.native_dropout, the kernel CUDA training uses. tests/ingest/onnx_loader_test.cc compares ckptplan's no-checkpointing saved
activation bytes for the same dims against these numbers (within 10%).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_sample_models  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch",
                   "saved_torch.json")
DIMS = {"mlp": {"batch": 32}, "gpt2_tiny": {"batch": 2, "seq": 64}, "cnn": {"batch": 4}}


def storage_key(t):
    s = t.storage()
    return s.data_ptr(), s.nbytes()


def fused_dropout(module):
    """nn.Dropout as CUDA training runs it: torch.native_dropout keeps a 1-byte
    mask. (On CPU, nn.Dropout multiplies by a float noise tensor and keeps that.)"""
    def forward(x):
        return torch.native_dropout(x, module.p, True)[0]
    module.forward = forward


def measure(name):
    model, args, _, _ = onnx_sample_models.build(name)
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            fused_dropout(module)
    resident = {storage_key(t) for t in list(model.parameters()) + list(model.buffers())}
    resident |= {storage_key(a) for a in args}
    saved = {}

    def pack(t):
        key = storage_key(t)
        if key not in resident and key[1] > 0:
            saved[key] = key[1]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(*args)
    out.float().pow(2).mean().backward()
    return {"dims": DIMS[name], "saved_bytes": sum(saved.values()), "saved_storages": len(saved)}


def main():
    result = {"torch_version": torch.__version__, "dtype": "float32", "models": {}}
    for name in DIMS:
        result["models"][name] = measure(name)
        print(name, result["models"][name])
    with open(OUT, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
