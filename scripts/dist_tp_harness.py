#!/usr/bin/python3
"""Measured harness for ckptplan's tensor-parallel predictions (docs/distributed.md).

A Megatron-style tensor-parallel copy of the small GPT (tests/torch/models.py
make_gpt) runs with torch.distributed over gloo on this CPU, one process per
rank: the first linear of attention (QKV) and of the MLP column-parallel, the
second row-parallel, heads split, LayerNorm, residuals, embeddings and head
replicated (--tp-embedding replicated). The collectives are
torch.autograd.Functions as Megatron writes them: without sequence
parallelism an identity whose backward all-reduces the input gradient before
each column-parallel linear and an all-reduce after each row-parallel one;
with it (--sp) the column-parallel linear gathers its input, saves the shard
and gathers it again in backward, and the row-parallel one reduce-scatters.
Gloo has no reduce_scatter or _allgather_base, so both are an in-place
all_reduce of one full tensor and a slice of it (a gather: a zeroed full
tensor with the rank's shard copied into its slice; a reduce-scatter: the
rank's slice of the all-reduced partial sums, copied out), which allocates
what the real collectives allocate.

Each rank's step-2 peak comes from the profiler's allocator events (as in
scripts/dist_common.py, shared with the other harnesses); the prediction is
`ckptplan simulate` of the one-device graph exported from make_gpt with
`--tp N --tp-embedding replicated [--sp]`.

Usage: /usr/bin/python3 scripts/dist_tp_harness.py BUILD/ckptplan [--markdown] [--world=N]
       [tp|tp-sp|tp-vocab|tp-sp-vocab ...]
Exits 1 when a rank is off by more than 1%, 77 when torch is missing.
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common as dc  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Configuration: (ckptplan flags, sequence parallel, vocabulary parallel).
CONFIGS = {
    "tp": (["--tp-embedding", "replicated"], False, False),
    "tp-sp": (["--tp-embedding", "replicated", "--sp"], True, False),
    "tp-vocab": (["--tp-embedding", "vocab"], False, True),
    "tp-sp-vocab": (["--tp-embedding", "vocab", "--sp"], True, True),
}


def all_reduce(tensor):
    """dist.all_reduce, then a pause: gloo's worker thread drops its
    reference to the tensor only after the wait returns, so a tensor the
    caller frees soon after would otherwise be freed on that thread at a
    moment that varies from run to run (seen: 32-64 KiB more at the peak on
    one rank in about half the runs)."""
    dist.all_reduce(tensor)
    time.sleep(0.005)


def all_reduce_max(tensor):
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    time.sleep(0.005)


def gather_seq(shard, world, rank):
    """All-gather along the sequence (dim 1): a zeroed full tensor, the shard
    copied into the rank's slice, all-reduced in place."""
    b, ts, h = shard.shape
    full = torch.zeros(b, ts * world, h, dtype=shard.dtype)
    full[:, rank * ts:(rank + 1) * ts].copy_(shard)
    all_reduce(full)
    return full


def scatter_seq(full, world, rank, reduce):
    """Reduce-scatter along the sequence: the full partial sums all-reduced in
    place (when `reduce`), then the rank's slice copied out."""
    if reduce:
        all_reduce(full)
    ts = full.shape[1] // world
    return full[:, rank * ts:(rank + 1) * ts].contiguous()


class CopyToTP(torch.autograd.Function):
    """Identity; the backward all-reduces the input gradient (in place)."""
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        all_reduce(grad)
        return grad


class ReduceFromTP(torch.autograd.Function):
    """All-reduce (in place); the backward is the identity."""
    @staticmethod
    def forward(ctx, x):
        all_reduce(x)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ColumnSP(torch.autograd.Function):
    """Column-parallel linear on a sequence-parallel input: gathers it, saves
    the shard, gathers it again for the weight gradient; the input gradient
    is reduce-scattered (`reduce`; a replicated head only slices it)."""
    @staticmethod
    def forward(ctx, x, weight, bias, world, rank, reduce):
        full = gather_seq(x, world, rank)
        b, t, h = full.shape
        flat = full.view(b * t, h)
        out = torch.addmm(bias, flat, weight.t()) if bias is not None else flat.mm(weight.t())
        del full, flat
        ctx.save_for_backward(x, weight)
        ctx.args = (world, rank, reduce, bias is not None)
        return out.view(b, t, -1)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        world, rank, reduce, has_bias = ctx.args
        b, t, k = grad.shape
        g = grad.reshape(b * t, k)
        if has_bias:  # as autograd orders addmm's backward: input, weight, bias
            d_in = g.mm(weight)
            shard = scatter_seq(d_in.view(b, t, -1), world, rank, reduce)
            del d_in
            full = gather_seq(x, world, rank)
            grad_w = g.t().mm(full.view(b * t, -1))
            del full
            grad_b = g.sum(0)
        else:  # mm's backward: weight first
            full = gather_seq(x, world, rank)
            grad_w = g.t().mm(full.view(b * t, -1))
            del full
            d_in = g.mm(weight)
            shard = scatter_seq(d_in.view(b, t, -1), world, rank, reduce)
            del d_in
            grad_b = None
        return shard, grad_w, grad_b, None, None, None


class RowSP(torch.autograd.Function):
    """Row-parallel linear whose output is reduce-scattered to sequence
    shards; the backward gathers the output gradient. Each rank adds
    bias / world (addmm's beta), so the sum adds the bias once."""
    @staticmethod
    def forward(ctx, y, weight, bias, world, rank):
        b, t, k = y.shape
        out = torch.addmm(bias, y.view(b * t, k), weight.t(), beta=1.0 / world)
        shard = scatter_seq(out.view(b, t, -1), world, rank, True)
        del out
        ctx.save_for_backward(y, weight)
        ctx.args = (world, rank)
        return shard

    @staticmethod
    def backward(ctx, grad):
        y, weight = ctx.saved_tensors
        world, rank = ctx.args
        full = gather_seq(grad, world, rank)
        b, t, h = full.shape
        g = full.view(b * t, h)
        d_y = g.mm(weight)
        grad_w = g.t().mm(y.reshape(b * t, -1))
        grad_b = g.sum(0).mul_(1.0 / world)
        del full, g
        return d_y.view(b, t, -1), grad_w, grad_b, None, None


class ScatterToSP(torch.autograd.Function):
    """A replicated tensor cut to the rank's sequence shard; the backward
    gathers the gradient."""
    @staticmethod
    def forward(ctx, x, world, rank):
        ctx.args = (world, rank)
        return scatter_seq(x, world, rank, False)

    @staticmethod
    def backward(ctx, grad):
        world, rank = ctx.args
        return gather_seq(grad, world, rank), None, None


class VocabLogSoftmax(torch.autograd.Function):
    """log_softmax over a vocabulary split across ranks: the max and the sum
    of exponentials all-reduced; allocates what torch's _log_softmax and its
    backward do (one output each) beyond two [tokens] vectors."""
    @staticmethod
    def forward(ctx, logits):
        m = logits.max(-1, keepdim=True)[0]
        all_reduce_max(m)
        e = logits.sub(m).exp_()
        total = e.sum(-1, keepdim=True)
        del e
        all_reduce(total)
        logp = logits - m.add_(total.log_())
        ctx.save_for_backward(logp)
        return logp

    @staticmethod
    def backward(ctx, grad):
        (logp,) = ctx.saved_tensors
        total = grad.sum(-1, keepdim=True)
        all_reduce(total)
        out = torch.exp(logp)
        out.mul_(total).neg_().add_(grad)
        return out


class VocabNll(torch.autograd.Function):
    """Mean negative log-likelihood of targets whose logits may sit on
    another rank: each rank picks the targets in its vocabulary slice."""
    @staticmethod
    def forward(ctx, logp, targets, start):
        local = targets - start
        inside = (local >= 0) & (local < logp.shape[1])
        local = local.masked_fill(~inside, 0)
        picked = logp.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill_(~inside, 0)
        all_reduce(picked)
        ctx.save_for_backward(local, inside)
        ctx.shape = logp.shape
        return -picked.mean()

    @staticmethod
    def backward(ctx, grad):
        local, inside = ctx.saved_tensors
        out = torch.zeros(ctx.shape, dtype=grad.dtype)
        value = (-grad / ctx.shape[0]) * inside.to(grad.dtype)
        out.scatter_(1, local.unsqueeze(1), value.unsqueeze(1))
        return out, None, None


def vocab_embedding(idx, weight, world, rank):
    """Megatron's VocabParallelEmbedding before its reduction: tokens outside
    the rank's slice look up row 0 and are zeroed."""
    rows = weight.shape[0]
    local = idx - rank * rows
    outside = (local < 0) | (local >= rows)
    local = local.masked_fill(outside, 0)
    out = F.embedding(local, weight)
    return out.masked_fill_(outside.unsqueeze(-1), 0)


class RowScatter(torch.autograd.Function):
    """Reduce-scatter of partial sums to sequence shards (a vocabulary-parallel
    embedding's output under --sp); the backward gathers the gradient."""
    @staticmethod
    def forward(ctx, x, world, rank):
        ctx.args = (world, rank)
        return scatter_seq(x, world, rank, True)

    @staticmethod
    def backward(ctx, grad):
        world, rank = ctx.args
        return gather_seq(grad, world, rank), None, None


class TPLinear(nn.Module):
    def __init__(self, d_in, d_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in) * 0.02)
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None


class TPAttention(nn.Module):
    def __init__(self, d, heads, world, rank, sp):
        super().__init__()
        self.world, self.rank, self.sp = world, rank, sp
        self.heads = heads // world
        self.head_dim = d // heads
        self.c_attn = TPLinear(d, 3 * d // world)
        self.c_proj = TPLinear(d // world, d)

    def forward(self, x):
        w, r = self.world, self.rank
        if self.sp:
            qkv = ColumnSP.apply(x, self.c_attn.weight, self.c_attn.bias, w, r, True)
        else:
            qkv = F.linear(CopyToTP.apply(x), self.c_attn.weight, self.c_attn.bias)
        b, t, _ = qkv.shape
        c = self.heads * self.head_dim
        q, k, v = qkv.split(c, dim=2)
        del qkv
        q = q.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf"))
        del mask
        att = F.softmax(att, dim=-1)
        y = att @ v
        del att, q, k, v
        y = y.transpose(1, 2).reshape(b, t, c)
        if self.sp:
            return RowSP.apply(y, self.c_proj.weight, self.c_proj.bias, w, r)
        # bias / world on each rank, so the all-reduced sum adds it once (a
        # [h] temporary; addmm's beta would scale the whole output gradient).
        out = torch.addmm(self.c_proj.bias / w, y.view(b * t, c), self.c_proj.weight.t())
        del y
        return ReduceFromTP.apply(out).view(b, t, -1)


class TPMLP(nn.Module):
    def __init__(self, d, world, rank, sp):
        super().__init__()
        self.world, self.rank, self.sp = world, rank, sp
        self.c_fc = TPLinear(d, 4 * d // world)
        self.c_proj = TPLinear(4 * d // world, d)

    def forward(self, x):
        w, r = self.world, self.rank
        if self.sp:
            h = ColumnSP.apply(x, self.c_fc.weight, self.c_fc.bias, w, r, True)
        else:
            h = F.linear(CopyToTP.apply(x), self.c_fc.weight, self.c_fc.bias)
        h = F.gelu(h)
        if self.sp:
            return RowSP.apply(h, self.c_proj.weight, self.c_proj.bias, w, r)
        b, t, k = h.shape
        out = torch.addmm(self.c_proj.bias / w, h.view(b * t, k), self.c_proj.weight.t())
        del h
        return ReduceFromTP.apply(out).view(b, t, -1)


class TPBlock(nn.Module):
    def __init__(self, d, heads, world, rank, sp):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = TPAttention(d, heads, world, rank, sp)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = TPMLP(d, world, rank, sp)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class TPGPT(nn.Module):
    """models.GPT's shapes and op order, tensor parallel over `world` ranks."""
    def __init__(self, world, rank, sp, by_vocab, vocab=128, d=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.world, self.rank, self.sp, self.by_vocab = world, rank, sp, by_vocab
        rows = vocab // world if by_vocab else vocab
        self.wte = nn.Embedding(rows, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(TPBlock(d, heads, world, rank, sp) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, rows, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        w, r = self.world, self.rank
        pos = torch.arange(t)
        if self.by_vocab:
            tok = vocab_embedding(idx, self.wte.weight, w, r)
            if not self.sp:
                tok = ReduceFromTP.apply(tok)
        else:
            tok = self.wte(idx)
        if self.sp:  # reduce-scattered (vocabulary) or cut (replicated)
            ts = t // w
            x = ScatterToSP.apply(tok, w, r) if not self.by_vocab else \
                RowScatter.apply(tok, w, r)
            del tok
            x = x + self.wpe(pos)[r * ts:(r + 1) * ts]
        else:
            x = tok + self.wpe(pos)
            del tok
        del pos
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if self.sp:  # the head reads the whole sequence
            x = ColumnSP.apply(x, self.lm_head.weight, None, w, r, self.by_vocab)
        elif self.by_vocab:
            x = self.lm_head(CopyToTP.apply(x))
        else:
            x = self.lm_head(x)
        if not self.by_vocab:
            return F.cross_entropy(x.reshape(b * t, -1), targets.reshape(b * t))
        logp = VocabLogSoftmax.apply(x.reshape(b * t, -1))
        del x
        return VocabNll.apply(logp, targets.reshape(b * t), r * self.lm_head.weight.shape[0])


def worker(rank, world, config, port, results):
    import models
    dc.init_rank(rank, world, port)
    with dc.memory_profile() as prof:
        _, inputs = models.make_gpt()
        torch.manual_seed(rank)
        _, sp, by_vocab = CONFIGS[config]
        model = TPGPT(world, rank, sp, by_vocab)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        dc.run_steps(dc.training_step(model, opt, inputs))
    peak, start = dc.step_peak(prof)
    unnamed = dc.unnamed_at_start(start, model, opt, inputs)
    # More than bookkeeping live at the step's start: the profile lost a free.
    results[rank] = (peak, unnamed <= dc.BOOKKEEPING, unnamed)
    dist.destroy_process_group()


if __name__ == "__main__":
    dc.run_layouts(CONFIGS, worker,
                   lambda world, config: ["--tp", str(world)] + CONFIGS[config][0],
                   by_rank=True, width=6, prefix="ckptplan_tp_")
