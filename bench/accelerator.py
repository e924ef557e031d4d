"""A Llama-style bf16 training step on the accelerator: torch_tpu (compiled, defer_and_fuse,
strict) against PyTorch's own eager and Inductor on the same device, in one run.

    python bench/accelerator.py [--size default|tiny] [--dim 2048 --layers 8 ...]
                                [--variants tpu-compiled,cuda-eager,...] [--steps 6]

The model: token embedding, blocks of RMSNorm, causal scaled-dot-product attention with
rotary positions, RMSNorm and a SwiGLU MLP, a final norm and an untied output head;
bfloat16 weights, AdamW (foreach), cross-entropy. The default size is the 542M-parameter
model (width 2048, 8 layers, 16 heads, MLP 5632, vocabulary 32000, batch 8 x 1024) that
PyTorch ran at 48.5% MFU eager and 57.7% with Inductor on an H200. ``--size tiny`` (the
default on the CPU platform) is a model that runs in seconds on a laptop.

Each variant runs in its own process (so one that crashes or runs out of memory does not
take the others with it, and each starts from a cold device), with the same seed and
initial weights. The table has the median step time over the timed steps (after
``--warmup`` steps, which compile), tokens/s, MFU against the device's peak dense FLOP/s
(6 x parameters x tokens + 12 x layers x width x sequence x tokens, as TorchTitan counts)
and the first step's loss, which should agree between variants to bfloat16 rounding.

Variants: ``tpu-compiled`` (the model under ``torch.compile(backend="tpu")``, the
optimizer in defer_and_fuse), ``tpu-defer_and_fuse``, ``tpu-strict``; the baselines
``cuda-eager`` and ``cuda-inductor`` when torch has CUDA, else ``cpu-eager`` (PyTorch on
the CPU, the same cores the CPU plugin uses). ``TORCH_TPU_PEAK_FLOPS`` sets the peak where
torch_tpu does not know the chip.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time

SIZES = {
    "default": dict(dim=2048, layers=8, heads=16, ffn=5632, vocab=32000, batch=8, seq=1024),
    "tiny": dict(dim=64, layers=2, heads=4, ffn=176, vocab=256, batch=2, seq=64),
}
TPU_VARIANTS = ("tpu-compiled", "tpu-defer_and_fuse", "tpu-strict")


# ---------------------------------------------------------------- the model


def build_model(args):
    import torch
    from torch import nn
    from torch.nn import functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim: int):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            # in float32, as Llama's reference does: bf16 squares lose the small rows
            normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
            return normed.type_as(x) * self.weight

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = args.dim
            self.attention_norm = RMSNorm(d)
            self.wqkv = nn.Linear(d, 3 * d, bias=False)
            self.wo = nn.Linear(d, d, bias=False)
            self.mlp_norm = RMSNorm(d)
            self.w_gate_up = nn.Linear(d, 2 * args.ffn, bias=False)
            self.w_down = nn.Linear(args.ffn, d, bias=False)

        def forward(self, x, cos, sin):
            b, t, d = x.shape
            h = args.heads
            q, k, v = self.wqkv(self.attention_norm(x)).view(b, t, 3, h, d // h).unbind(2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            attn = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.wo(attn.transpose(1, 2).reshape(b, t, d))
            gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
            return x + self.w_down(F.silu(gate) * up)

    def rotate(x, cos, sin):
        first, second = x.chunk(2, dim=-1)
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(args.vocab, args.dim)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.norm = RMSNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)
            half = args.dim // args.heads // 2
            freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
            angle = torch.outer(torch.arange(args.seq, dtype=torch.float32), freq)
            # [seq, 1, half]: broadcast over the heads of [batch, seq, heads, head_dim / 2]
            self.register_buffer("cos", angle.cos()[:, None, :], persistent=False)
            self.register_buffer("sin", angle.sin()[:, None, :], persistent=False)

        def forward(self, tokens, targets):
            x = self.embed(tokens)
            cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
            for block in self.blocks:
                x = block(x, cos, sin)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().view(-1, args.vocab), targets.reshape(-1))

    torch.manual_seed(0)
    return Llama().to(torch.bfloat16)


def flops_per_token(args, params: int) -> float:
    return 6.0 * params + 12.0 * args.layers * args.dim * args.seq


# ---------------------------------------------------------------- one variant, in its own process


def run_variant(args) -> dict:
    import torch

    variant = args.run_variant
    backend, mode = variant.split("-", 1)
    if backend == "tpu":
        import torch_tpu

        device = torch.device("tpu")
        torch_tpu.set_eager_mode("strict" if mode == "strict" else "defer_and_fuse")
        info = torch_tpu._C._plugin_info()
        peak = torch.tpu.get_device_properties(0).peak_flops
        name = f"{torch.tpu.get_device_name(0)} ({info['platform_name']} plugin)"

        def sync():
            torch.tpu.synchronize()
    else:
        device = torch.device(backend)
        if backend == "cuda":
            name = torch.cuda.get_device_name(0)
            peak = float(os.environ.get("TORCH_TPU_PEAK_FLOPS", "nan"))
            if math.isnan(peak):
                from torch_tpu._runtime.peak_flops import gpu_peak_flops

                peak = gpu_peak_flops(name)

            def sync():
                torch.cuda.synchronize()
        else:
            name = "PyTorch CPU"
            peak = float("nan")

            def sync():
                pass

    model = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    forward = model
    if mode == "compiled":
        forward = torch.compile(model, backend="tpu")
    elif mode == "inductor":
        forward = torch.compile(model)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(args.vocab, (args.batch, args.seq + 1), generator=generator)
    inputs, targets = tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    def step():
        loss = forward(inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    times, losses = [], []
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - start)
        losses.append(float(loss.detach().float().cpu()))
    steady = times[args.warmup :]
    result = dict(
        variant=variant,
        device=name,
        params=params,
        step_ms=statistics.median(steady) * 1e3,
        warmup_s=sum(times[: args.warmup]),
        first_loss=losses[0],
        last_loss=losses[-1],
        peak_flops=peak,
    )
    if backend == "tpu":
        import torch_tpu

        result["compiles"] = torch_tpu.metrics.snapshot()["compiles"]
    return result


# ---------------------------------------------------------------- the driver


def default_variants(tpu_platform: str) -> list[str]:
    import torch

    if torch.cuda.is_available():
        return [*TPU_VARIANTS, "cuda-eager", "cuda-inductor"]
    return [*TPU_VARIANTS, "cpu-eager"]


def tpu_platform() -> str:
    """The platform torch_tpu would start on, read in a child so this process keeps no
    client (on a GPU, the variants each want the whole device)."""
    code = "import torch, torch_tpu; print(torch_tpu._C._plugin_info()['platform_name'])"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"torch_tpu does not start here:\n{run.stderr.strip()}")
    return run.stdout.split()[-1]


def describe_failure(run: subprocess.CompletedProcess) -> str:
    if run.returncode < 0:
        return f"killed by {signal.Signals(-run.returncode).name}"
    lines = [line for line in run.stderr.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else f"exit status {run.returncode}")[:100]


def spawn(args, variant: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--run-variant", variant]
    for key in ("dim", "layers", "heads", "ffn", "vocab", "batch", "seq", "steps", "warmup"):
        command += [f"--{key}", str(getattr(args, key))]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(variant=variant, error=f"timed out after {args.timeout} s")
    for line in run.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return dict(variant=variant, error=describe_failure(run))


def table(args, results: list[dict]) -> str:
    tokens = args.batch * args.seq
    baseline = next(
        (r for r in results if "error" not in r and not r["variant"].startswith("tpu")), None
    )
    lines = [
        f"{'variant':<20}{'step ms':>10}{'tokens/s':>12}{'MFU':>8}{'vs base':>9}"
        f"{'warm-up s':>11}{'compiles':>10}{'1st loss':>10}  device"
    ]
    for r in results:
        if "error" in r:
            lines.append(f"{r['variant']:<20}  FAILED: {r['error']}")
            continue
        per_second = tokens / (r["step_ms"] / 1e3)
        mfu = per_second * flops_per_token(args, r["params"]) / r["peak_flops"]
        mfu_text = "n/a" if math.isnan(mfu) else f"{mfu:.1%}"
        ratio = f"{baseline['step_ms'] / r['step_ms']:.2f}x" if baseline else "n/a"
        compiles = str(r.get("compiles", "-"))
        lines.append(
            f"{r['variant']:<20}{r['step_ms']:>10.1f}{per_second:>12,.0f}{mfu_text:>8}{ratio:>9}"
            f"{r['warmup_s']:>11.1f}{compiles:>10}{r['first_loss']:>10.4f}  {r['device']}"
        )
    if results and "params" in next((r for r in results if "params" in r), {}):
        params = next(r for r in results if "params" in r)["params"]
        lines.append(
            f"model: {params / 1e6:.1f}M parameters, width {args.dim}, {args.layers} layers, "
            f"batch {args.batch} x {args.seq} tokens, median of {args.steps} steps after "
            f"{args.warmup}; 'vs base' is the baseline's step time over the variant's (> 1: faster)"
        )
    return "\n".join(lines)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), help="default: tiny on the CPU platform")
    for key in SIZES["default"]:
        parser.add_argument(f"--{key}", type=int)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--variants", help="comma-separated; default: all that this machine has")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per variant")
    parser.add_argument("--run-variant", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.run_variant:
        for key, value in SIZES["default"].items():
            if getattr(args, key) is None:
                setattr(args, key, value)
        print("RESULT " + json.dumps(run_variant(args)), flush=True)
        return 0
    platform = tpu_platform()
    size = SIZES[args.size or ("tiny" if platform == "cpu" else "default")]
    for key, value in size.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        raise SystemExit(f"--dim {args.dim} must split into --heads {args.heads} even halves")
    variants = args.variants.split(",") if args.variants else default_variants(platform)
    known = {*TPU_VARIANTS, "cuda-eager", "cuda-inductor", "cpu-eager", "cpu-inductor"}
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {sorted(known)}")
    results = []
    for variant in variants:
        results.append(spawn(args, variant))
        print(f"  {variant}: done", file=sys.stderr, flush=True)
    print(table(args, results))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
