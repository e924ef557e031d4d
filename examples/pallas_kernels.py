"""Pallas kernels as PyTorch ops on tpu, inside the example GPT.

Three kernels become torch ops with torch_tpu.kernels.jax_op:

- an RMSNorm written in Pallas (rows in blocks), whose backward is a second Pallas kernel
  given to jax_op (``backward=``);
- a causal flash attention written in Pallas (online softmax over key blocks, never the
  whole score matrix), whose gradient comes from a jax.custom_vjp;
- a plain JAX activation (squared ReLU), differentiated by jax.vjp.

The GPT is trained twice from the same weights: with PyTorch's own RMSNorm, attention and
activation, and with the three kernels in their place. The losses must agree, in eager mode
and under torch.compile. On the CPU platform Pallas runs in interpret mode (StableHLO
loops), on a TPU as Mosaic kernels.

    pip install 'torch_tpu[jax]'
    TORCH_TPU_CPU_FALLBACK=error python examples/pallas_kernels.py
"""

from __future__ import annotations

import functools
import math
import os
import sys

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, Attention, Config, batches  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.kernels import jax_op  # noqa: E402

# ---- RMSNorm ---------------------------------------------------------------------------


def _row_block(rows: int) -> int:
    return math.gcd(rows, 128)


def _rms_forward_kernel(x_ref, w_ref, o_ref, *, eps):
    x = x_ref[...].astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    o_ref[...] = (x * scale * w_ref[...]).astype(o_ref.dtype)


def _rms_backward_kernel(x_ref, w_ref, g_ref, dx_ref, dw_ref, *, eps):
    x = x_ref[...].astype(jnp.float32)
    g = g_ref[...].astype(jnp.float32) * w_ref[...]
    scale = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    normed = x * scale
    dx = scale * (g - normed * jnp.mean(g * normed, axis=-1, keepdims=True))
    dx_ref[...] = dx.astype(dx_ref.dtype)
    dw_ref[...] = jnp.sum(g_ref[...].astype(jnp.float32) * normed, axis=0, keepdims=True)


def _rows(x):
    return x.reshape(-1, x.shape[-1])


def rms_norm_backward(x, w, g, eps: float = 1e-6):
    """Gradients of rms_norm for x and w: one Pallas kernel over row blocks."""
    rows, width = _rows(x).shape
    block = _row_block(rows)
    dx, dw_parts = pl.pallas_call(
        functools.partial(_rms_backward_kernel, eps=eps),
        grid=(rows // block,),
        in_specs=[
            pl.BlockSpec((block, width), lambda i: (i, 0)),
            pl.BlockSpec((width,), lambda i: (0,)),
            pl.BlockSpec((block, width), lambda i: (i, 0)),
        ],
        out_specs=[
            pl.BlockSpec((block, width), lambda i: (i, 0)),
            pl.BlockSpec((1, width), lambda i: (i, 0)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct((rows, width), x.dtype),
            jax.ShapeDtypeStruct((rows // block, width), jnp.float32),
        ],
    )(_rows(x), w, _rows(g))
    return dx.reshape(x.shape), dw_parts.sum(0).astype(w.dtype)


@jax_op("examples::rms_norm", backward=rms_norm_backward)
def rms_norm(x, w, eps: float = 1e-6):
    """x / sqrt(mean(x**2, -1) + eps) * w, in a Pallas kernel over blocks of rows."""
    rows, width = _rows(x).shape
    block = _row_block(rows)
    out = pl.pallas_call(
        functools.partial(_rms_forward_kernel, eps=eps),
        grid=(rows // block,),
        in_specs=[
            pl.BlockSpec((block, width), lambda i: (i, 0)),
            pl.BlockSpec((width,), lambda i: (0,)),
        ],
        out_specs=pl.BlockSpec((block, width), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, width), x.dtype),
    )(_rows(x), w)
    return out.reshape(x.shape)


class PallasRMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


# ---- causal flash attention --------------------------------------------------------------


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, *, block_k, scale):
    block_q, _ = q_ref.shape
    first_query = pl.program_id(1) * block_q
    q = q_ref[...].astype(jnp.float32) * scale
    queries = first_query + jnp.arange(block_q)[:, None]

    def step(j, carry):
        out, running_max, total = carry
        k = k_ref[pl.ds(j * block_k, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(j * block_k, block_k), :].astype(jnp.float32)
        scores = q @ k.T
        keys = j * block_k + jnp.arange(block_k)[None, :]
        scores = jnp.where(keys <= queries, scores, -jnp.inf)
        new_max = jnp.maximum(running_max, scores.max(axis=-1, keepdims=True))
        correction = jnp.exp(running_max - new_max)
        p = jnp.exp(scores - new_max)
        return out * correction + p @ v, new_max, total * correction + p.sum(-1, keepdims=True)

    width = q_ref.shape[-1]
    start = (
        jnp.zeros((block_q, width), jnp.float32),
        jnp.full((block_q, 1), -jnp.inf, jnp.float32),
        jnp.zeros((block_q, 1), jnp.float32),
    )
    # Causal: key blocks after this query block's last query are skipped altogether.
    blocks = (first_query + block_q + block_k - 1) // block_k
    out, running_max, total = jax.lax.fori_loop(0, blocks, step, start)
    o_ref[...] = (out / total).astype(o_ref.dtype)
    lse_ref[...] = (running_max + jnp.log(total))[:, 0]


def _flash_forward(q, k, v):
    heads, length, width = q.shape
    block = math.gcd(length, 64)
    kernel = functools.partial(_flash_kernel, block_k=block, scale=1.0 / math.sqrt(width))
    return pl.pallas_call(
        kernel,
        grid=(heads, length // block),
        in_specs=[
            pl.BlockSpec((None, block, width), lambda h, i: (h, i, 0)),
            pl.BlockSpec((None, length, width), lambda h, i: (h, 0, 0)),
            pl.BlockSpec((None, length, width), lambda h, i: (h, 0, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, block, width), lambda h, i: (h, i, 0)),
            pl.BlockSpec((None, block), lambda h, i: (h, i)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((heads, length), jnp.float32),
        ],
    )(q, k, v)


@jax.custom_vjp
def _flash(q, k, v):
    return _flash_forward(q, k, v)[0]


def _flash_fwd(q, k, v):
    out, lse = _flash_forward(q, k, v)
    return out, (q, k, v, out, lse)


def _flash_bwd(residuals, g):
    # The probabilities are rebuilt from the saved log-sum-exp (FlashAttention's backward).
    q, k, v, out, lse = residuals
    scale = 1.0 / math.sqrt(q.shape[-1])
    length = q.shape[1]
    causal = jnp.tril(jnp.ones((length, length), bool))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) * scale
    p = jnp.where(causal, jnp.exp(scores - lse[..., None]), 0.0)
    dv = jnp.einsum("hqk,hqd->hkd", p, g)
    dp = jnp.einsum("hqd,hkd->hqk", g, v)
    ds = p * (dp - jnp.sum(g * out, -1, keepdims=True))
    dq = jnp.einsum("hqk,hkd->hqd", ds, k) * scale
    dk = jnp.einsum("hqk,hqd->hkd", ds, q) * scale
    return dq, dk, dv


_flash.defvjp(_flash_fwd, _flash_bwd)


@jax_op("examples::flash_attention")
def flash_attention(q, k, v):
    """Causal softmax(q k^T / sqrt(d)) v for (batch, heads, length, head_dim) inputs."""
    batch, heads, length, width = q.shape
    flat = [t.reshape(batch * heads, length, width) for t in (q, k, v)]
    return _flash(*flat).reshape(q.shape)


class PallasAttention(Attention):
    def forward(self, x, cache=None, position=None):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = flash_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


# ---- a plain JAX activation ----------------------------------------------------------------


@jax_op("examples::squared_relu")
def squared_relu(x):
    """relu(x)**2 (Primer's activation), differentiated by jax.vjp."""
    return jnp.square(jax.nn.relu(x))


class SquaredReLU(nn.Module):
    def __init__(self, kernel: bool):
        super().__init__()
        self.kernel = kernel

    def forward(self, x):
        return squared_relu(x) if self.kernel else F.relu(x).square()


# ---- the GPT, with native ops or with the kernels --------------------------------------------


def make_gpt(kernels: bool, config: Config) -> GPT:
    """The example GPT with RMSNorm and squared ReLU: PyTorch's or the JAX kernels."""
    torch.manual_seed(0)
    model = GPT(config)
    norm = PallasRMSNorm if kernels else nn.RMSNorm
    for block in model.blocks:
        block.ln1, block.ln2 = norm(config.width, eps=1e-6), norm(config.width, eps=1e-6)
        block.mlp[1] = SquaredReLU(kernels)
        if kernels:
            block.attn.__class__ = PallasAttention
    model.ln = norm(config.width, eps=1e-6)
    return model


def train(kernels: bool, compiled: bool, steps: int, device: str = "tpu") -> list[float]:
    config = Config()
    model = make_gpt(kernels, config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), y.reshape(-1))
        loss.backward()
        return loss

    if compiled:
        step = torch.compile(step, backend="tpu")
    losses = []
    for x, y in batches(config, batch=8, steps=steps):
        optimizer.zero_grad()
        loss = step(x.to(device), y.to(device))
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    steps = 8
    runs = {
        "native eager": train(False, False, steps),
        "kernels eager": train(True, False, steps),
        "native compiled": train(False, True, steps),
        "kernels compiled": train(True, True, steps),
    }
    print("step  " + "  ".join(f"{name:>16}" for name in runs))
    for i in range(steps):
        print(f"{i + 1:4d}  " + "  ".join(f"{losses[i]:16.5f}" for losses in runs.values()))
    reference = runs["native eager"]
    for name, losses in runs.items():
        worst = max(abs(a - b) for a, b in zip(losses, reference))
        assert worst < 2e-3, f"{name} differs from native eager by {worst}"
    assert reference[-1] < reference[0], "the loss did not fall"
    print(f"kernels match the native ops on {torch_tpu.platform()} (platform of the tpu device)")


if __name__ == "__main__":
    main()
