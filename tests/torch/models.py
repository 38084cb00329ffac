"""Small models for the PyTorch round-trip tests. Each factory returns
(model, example_inputs); model(*example_inputs) returns the scalar loss.

Forward code reassigns its locals so that eager PyTorch frees a temporary
after its last use, as the graph's lifetime rule does (a Python local that
outlives its last use would hold memory the traced graph does not)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=256, classes=10, depth=3, activation=torch.relu):
        super().__init__()
        dims = [d_in] + [hidden] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(hidden, classes)
        self.activation = activation

    def forward(self, x, y):
        for layer in self.layers:
            x = self.activation(layer(x))
        return F.cross_entropy(self.head(x), y)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.reshape(b, t, h, c // h).transpose(1, 2)
        k = k.reshape(b, t, h, c // h).transpose(1, 2)
        v = v.reshape(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf"))
        del mask
        att = F.softmax(att, dim=-1)
        y = att @ v
        del att, q, k, v
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class MLPBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLPBlock(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab=128, d=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        pos = torch.arange(t)
        x = self.wte(idx) + self.wpe(pos)
        del pos
        for block in self.h:
            x = block(x)
        x = self.lm_head(self.ln_f(x))
        return F.cross_entropy(x.reshape(b * t, -1), targets.reshape(b * t))


def make_mlp(batch=32):
    torch.manual_seed(0)
    model = MLP()
    return model, (torch.randn(batch, 64), torch.randint(0, 10, (batch,)))


def make_gpt(batch=4, layers=2):
    torch.manual_seed(0)
    model = GPT(layers=layers)
    idx = torch.randint(0, 128, (batch, 32))
    return model, (idx, torch.randint(0, 128, (batch, 32)))


def make_gpt_tied(batch=4, layers=2):
    """GPT with lm_head sharing wte's weight (one parameter, two uses)."""
    model, inputs = make_gpt(batch, layers)
    model.lm_head.weight = model.wte.weight
    return model, inputs


class ConvNet(nn.Module):
    """Conv, BatchNorm, ReLU(inplace=True), Hardswish(inplace=True), dropout:
    the in-place modules, training-time side effects and random ops a plan
    must handle."""

    def __init__(self, width=16, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(width)
        self.act = nn.Hardswish(inplace=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, classes)

    def forward(self, x, y):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.act(self.bn2(self.conv2(x)))
        x = self.drop(x.mean((2, 3)))
        return F.cross_entropy(self.head(x), y)


def make_convnet(batch=8, size=16):
    torch.manual_seed(0)
    model = ConvNet()
    return model, (torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,)))


def make_mlp_small(batch=4):
    """The graphs in tests/graphs/torch_mlp_*.json (alias_of and in-place forms)."""
    torch.manual_seed(0)
    model = MLP(d_in=16, hidden=32, classes=4, depth=2)
    return model, (torch.randn(batch, 16), torch.randint(0, 4, (batch,)))


def make_lowrank_mlp(batch=512, rank=4, noise=1e-4):
    """An MLP whose linear weights are rank-`rank` matrices plus `noise`
    (times a standard normal): their re-runs at rank >= `rank` are nearly
    exact, below it they are not (the approximate-recompute tests)."""
    torch.manual_seed(0)
    model = MLP(d_in=64, hidden=128, classes=10, depth=3)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                n, k = module.weight.shape
                r = min(rank, n, k)
                low = torch.randn(n, r) @ torch.randn(r, k) / math.sqrt(r * k)
                module.weight.copy_(low + noise * torch.randn(n, k))
    return model, (torch.randn(batch, 64), torch.randint(0, 10, (batch,)))
