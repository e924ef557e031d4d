"""A small GPT (token and position embeddings, pre-LayerNorm blocks with causal
scaled-dot-product attention and a GELU MLP) used by the examples and benchmarks.
Attention takes an optional key/value cache for incremental decoding: a growing one
(a list [keys, values], concatenated to each step) or a StaticCache, whose shapes stay
the same for a whole size bucket so that compiled programs are reused step to step."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class Config:
    vocab: int = 64
    context: int = 32
    width: int = 64
    heads: int = 4
    layers: int = 2


class StaticCache:
    """Keys and values preallocated for `length` positions, written at a position held
    in a tensor. Every decoding step then has the same shapes and the same program;
    only when the cache fills does it grow to the next bucket (twice the length), so
    decoding n tokens builds about log2(n) distinct programs instead of n."""

    def __init__(self, batch: int, heads: int, head_dim: int, length: int, device):
        shape = (batch, heads, length, head_dim)
        self.keys = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)

    @property
    def length(self) -> int:
        return self.keys.shape[2]

    def grow(self, length: int) -> None:
        pad = (0, 0, 0, length - self.length)
        self.keys, self.values = F.pad(self.keys, pad), F.pad(self.values, pad)

    def update(self, k, v, position):
        """Stores one step's k, v (batch, heads, 1, head_dim) at `position` (a 0-d tensor);
        returns all keys, values and the mask of the positions filled so far."""
        slots = torch.arange(self.length, device=k.device)
        here = (slots == position).view(1, 1, -1, 1)
        self.keys = torch.where(here, k, self.keys)
        self.values = torch.where(here, v, self.values)
        return self.keys, self.values, (slots <= position).view(1, 1, 1, -1)


class Attention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)

    def forward(self, x, cache=None, position=None):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        if isinstance(cache, StaticCache):
            k, v, filled = cache.update(k, v, position)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=filled)
            return self.proj(y.transpose(1, 2).reshape(batch, length, width))
        # With a cache the queries are the newest positions: causal masking is only
        # needed when queries and keys cover the same positions, that is without
        # cached keys. (Decided without comparing sizes, which under dynamic shapes
        # would be a symbolic bool and break the compiled graph.)
        causal = cache is None or cache[0] is None
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[0], cache[1] = k, v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.width)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.width)
        self.mlp = nn.Sequential(
            nn.Linear(config.width, 4 * config.width),
            nn.GELU(),
            nn.Linear(4 * config.width, config.width),
        )

    def forward(self, x, cache=None, position=None):
        x = x + self.attn(self.ln1(x), cache, position)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab, config.width)
        self.positions = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab, bias=False)

    def forward(self, idx, caches=None, start=0):
        """`start` is the position of idx's first token: an int, or with StaticCaches a
        0-d tensor (one token at a time), so that positions never change a program."""
        if isinstance(start, torch.Tensor):
            positions = start.view(1)
        else:
            positions = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches is not None else None, start)
        return self.head(self.ln(x))


def batches(config: Config, batch: int, steps: int, seed: int = 0):
    """Sequences that count up modulo the vocabulary from a random start: learnable."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, config.vocab, (batch, 1), generator=generator)
        seq = (start + torch.arange(config.context + 1)) % config.vocab
        yield seq[:, :-1], seq[:, 1:]
