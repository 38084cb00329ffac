#!/usr/bin/python3
"""Exports the ONNX samples in sample_graphs/ (run: /usr/bin/python3 scripts/make_onnx_samples.py).

`--gpt2-small PATH.onnx` instead writes the benchmark's GPT-2 small export
(with weights, ~500 MB) and PATH_noweights.onnx (weights external and deleted).

Debian's python3-torch 1.13 and python3-onnx 1.12; no downloads. Models are
exported in training mode without constant folding, so Dropout and
BatchNormalization keep their training behaviour, as a user's export would.
"""
import os
import sys

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_sample_models  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sample_graphs")


def export(name, path):
    model, args, input_names, dynamic_axes = onnx_sample_models.build(name)
    model.train()
    torch.onnx.export(model, args, path, input_names=input_names, output_names=["output"],
                      dynamic_axes=dynamic_axes, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def export_gpt2_small(path, keep_weights):
    """GPT-2 small sized (124M parameters, 12 layers, 768 hidden, 50257 vocab)
    for scripts/bench_onnx.sh; with keep_weights=False the weights go to an
    external file that is then deleted."""
    torch.manual_seed(0)
    model = onnx_sample_models.Gpt(vocab=50257, n_embd=768, n_head=12, n_layer=12, n_ctx=1024)
    model.train()
    ids = torch.randint(0, 50257, (1, 16))
    torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=["output"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}}, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    if keep_weights:
        return
    data = os.path.basename(path) + ".weights.bin"
    onnx.save_model(onnx.load(path), path, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=data, size_threshold=0)
    os.remove(os.path.join(os.path.dirname(path), data))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--gpt2-small":
        export_gpt2_small(sys.argv[2], keep_weights=True)
        export_gpt2_small(sys.argv[2].replace(".onnx", "_noweights.onnx"), keep_weights=False)
        return
    os.makedirs(OUT, exist_ok=True)
    for name in ["mlp", "gpt2_tiny", "cnn"]:
        export(name, os.path.join(OUT, name + ".onnx"))
    # The same MLP with its weights in an external file that is then deleted:
    # ckptplan must plan from dims + data_type alone.
    path = os.path.join(OUT, "mlp_external.onnx")
    data = "mlp_external.weights.bin"
    export("mlp", path)
    model = onnx.load(path)
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=0)
    os.remove(os.path.join(OUT, data))
    for name in sorted(os.listdir(OUT)):
        if name.endswith(".onnx"):
            print(f"{name}: {os.path.getsize(os.path.join(OUT, name))} bytes")


if __name__ == "__main__":
    main()
