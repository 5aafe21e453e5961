"""A small GPT-style transformer built from a config, with random weights.

Used by record_snapshot.py and record_multigraph.py to make real allocation
traces on a GPU without downloading anything: the architecture (token and
position embeddings, pre-norm blocks of causal self-attention and an MLP, a
language-model head) is that of GPT-2, the sizes come from TinyGPTConfig.
Attention uses torch.nn.functional.scaled_dot_product_attention, which CUDA
graphs can capture.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TinyGPTConfig:
    vocab_size: int = 8192
    seq_len: int = 256
    n_layer: int = 4
    n_head: int = 8
    d_model: int = 512
    mlp_ratio: int = 4


class Block(nn.Module):
    def __init__(self, c: TinyGPTConfig):
        super().__init__()
        self.n_head = c.n_head
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc = nn.Linear(c.d_model, c.mlp_ratio * c.d_model)
        self.out = nn.Linear(c.mlp_ratio * c.d_model, c.d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, c: TinyGPTConfig):
        super().__init__()
        self.config = c
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Parameter(torch.randn(c.seq_len, c.d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def add_config_args(parser, **defaults):
    """Command-line options for every field of TinyGPTConfig."""
    base = TinyGPTConfig(**defaults)
    for name, value in vars(base).items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=value,
                            help=f"model {name} (default {value})")


def config_from_args(args):
    return TinyGPTConfig(**{name: getattr(args, name) for name in vars(TinyGPTConfig())})
