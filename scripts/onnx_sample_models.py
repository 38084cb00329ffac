"""Small PyTorch models behind sample_graphs/*.onnx.

Shared by scripts/make_onnx_samples.py (exports them) and
scripts/measure_saved_torch.py (measures what eager autograd saves), so both
see the same architecture. Sizes are kept small so each .onnx stays < 1 MB.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(256, 256)
        self.act = nn.GELU()
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.drop(torch.relu(self.fc1(x)))
        return self.fc3(self.act(self.fc2(x)))


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, n_ctx):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(0.1)
        self.resid_drop = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = c // self.n_head
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_ctx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = Attention(n_embd, n_head, n_ctx)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """GPT-2 style decoder (pre-LayerNorm, learned positions, tied head)."""

    def __init__(self, vocab=256, n_embd=64, n_head=4, n_layer=2, n_ctx=128):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(n_ctx, n_embd)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block(n_embd, n_head, n_ctx) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, input_ids):
        t = input_ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class ConvBnRelu(nn.Sequential):
    def __init__(self, cin, cout, stride=1):
        super().__init__(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = ConvBnRelu(c, c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(self.conv1(x))))


class Cnn(nn.Module):
    """ResNet blocks plus a UNet-style skip (upsample + concat)."""

    def __init__(self):
        super().__init__()
        self.stem = ConvBnRelu(3, 16)
        self.res1 = ResBlock(16)
        self.pool = nn.MaxPool2d(2)
        self.down = ConvBnRelu(16, 32)
        self.res2 = ResBlock(32)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = ConvBnRelu(48, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        skip = self.res1(self.stem(x))
        y = self.res2(self.down(self.pool(skip)))
        y = self.fuse(torch.cat([self.up(y), skip], dim=1))
        return self.head(torch.flatten(y.mean(dim=(2, 3)), 1))


def build(name):
    """(model, example inputs, input names, dynamic axes) for a sample name."""
    torch.manual_seed(0)
    if name == "mlp":
        return Mlp(), (torch.randn(32, 64),), ["x"], {"x": {0: "batch"}}
    if name == "gpt2_tiny":
        ids = torch.randint(0, 256, (2, 64))
        return Gpt(), (ids,), ["input_ids"], {"input_ids": {0: "batch", 1: "seq"}}
    if name == "cnn":
        return Cnn(), (torch.randn(4, 3, 32, 32),), ["images"], {"images": {0: "batch"}}
    raise ValueError(name)
