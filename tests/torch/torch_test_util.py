"""What the PyTorch tests (tests/torch_*_test.py) share: importing this exits
77 (ctest's "skipped") when torch is missing; ckptplan() runs the binary the
test was given as its first argument."""
import json
import os
import subprocess
import sys

try:
    import torch  # noqa: F401
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


def model_spec(factory):
    """A --model argument naming `factory` in tests/torch/models.py."""
    return os.path.join(HERE, "models.py") + ":" + factory


def ckptplan(*args):
    """stdout of `CKPTPLAN_BINARY ARGS`; raises when it exits non-zero."""
    return subprocess.run([sys.argv[1], *args], check=True, capture_output=True,
                          text=True).stdout


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
