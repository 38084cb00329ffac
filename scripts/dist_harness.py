#!/usr/bin/python3
"""Measured harness for ckptplan's per-rank predictions (docs/distributed.md).

Runs a small GPT (tests/torch/models.py make_gpt) with torch.distributed over
gloo on this CPU, one process per rank, and measures each rank's step-2 peak
at the allocator (profiler memory events, as scripts/dist_common.py says;
it holds what this harness shares with the tensor-parallel and pipeline
ones). The prediction is `ckptplan simulate` of the one-device graph
that ckptplan_torch.export exports from the same model, with the layout
flags; ranks are compared as sorted lists (ckptplan groups equal ranks).

Configurations: DDP (bucket copy and gradient_as_bucket_view) and
ZeroRedundancyOptimizer (over DDP), at world sizes 2 and 4.

Usage: /usr/bin/python3 scripts/dist_harness.py BUILD/ckptplan [--markdown] [--world=N]
       [CONFIG ...]
Exits 1 when a rank is off by more than 1%, 77 when torch is missing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common as dc  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

CONFIGS = {
    "ddp-copy": ["--grad-buckets", "copy"],
    "ddp-view": ["--grad-buckets", "view"],
    "zero1": ["--zero", "1", "--zero-partition", "params"],
}


def worker(rank, world, config, port, results):
    import models
    dc.init_rank(rank, world, port)
    with dc.memory_profile() as prof:
        model, inputs = models.make_gpt()
        ddp = DDP(model, gradient_as_bucket_view=(config == "ddp-view"), bucket_cap_mb=25)
        if config == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                          lr=1e-3)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        dc.run_steps(dc.training_step(ddp, opt, inputs))
    peak, start = dc.step_peak(prof)
    # What is live at the step's start besides the tensors we can name is
    # DDP's buckets (one copy of the gradients) and a little bookkeeping. More
    # means the profiler lost a free event (seen: one event fewer, a block of
    # all the parameters' bytes left "live"): the run is not a measurement.
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    unnamed = dc.unnamed_at_start(start, model, opt, inputs)
    results[rank] = (peak, unnamed <= param_bytes + dc.BOOKKEEPING, unnamed)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    dc.run_layouts(CONFIGS, worker, lambda world, config: ["--dp", str(world)] + CONFIGS[config],
                   by_rank=False, width=9, prefix="ckptplan_dist_")
