"""What TPU and GPU compilers say of our programs, without a TPU or GPU: a training step of
the example GPT and of a Llama-style bf16 model, compiled for each target through the
compile-only path (torch_tpu.targets), and the compile time of each program.

    python bench/targets.py [--targets v5e:1x1,v6e:1x1,tpu7x:1x1x1,h100] [--size small|tiny]
                            [--modes compiled,defer_and_fuse,strict] [--json F]

Each model and mode runs in its own process here (the CPU platform, XLA:CPU shortcuts off so
the programs are the ones an accelerator runs): two training steps (forward, backward, AdamW)
with every program also compiled for each target. Per target, over the distinct programs of
those steps, each counted once: in compiled mode the step's graphs (the first step's optimizer
graph, which sets up its state, is another program than the second's), in defer_and_fuse both
steps' fused graphs, so about two steps:
peak memory (the largest program's arguments + outputs + temporaries + code), flops and bytes
accessed (the TPU compiler's cost analysis; the GPU compiler has none), a roofline time (each
program's larger of flops at the chip's peak and bytes at its HBM bandwidth, summed), and the
compile time per program (median and total).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LLAMA_SIZES = {
    "small": dict(dim=512, layers=4, heads=8, ffn=1408, vocab=8000, batch=4, seq=256),
    "tiny": dict(dim=64, layers=2, heads=4, ffn=176, vocab=256, batch=2, seq=64),
}


def _llama_step(size: str, mode: str):
    sys.path.insert(0, HERE)
    import torch
    from accelerator import build_model

    args = argparse.Namespace(**LLAMA_SIZES[size])
    model = build_model(args).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    forward = torch.compile(model, backend="tpu") if mode == "compiled" else model
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(args.vocab, (args.batch, args.seq + 1), generator=generator)
    inputs, targets = tokens[:, :-1].to("tpu"), tokens[:, 1:].to("tpu")

    def step():
        loss = forward(inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach().float().cpu())

    return step


def _gpt_step(mode: str):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch
    from gpt import GPT, Config, batches
    from torch.nn import functional as F

    torch.manual_seed(0)
    config = Config()
    model = GPT(config).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    forward = torch.compile(model, backend="tpu") if mode == "compiled" else model
    x, y = (t.to("tpu") for t in next(batches(config, batch=16, steps=1)))

    def step():
        logits = forward(x)
        loss = F.cross_entropy(logits.view(-1, config.vocab), y.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach().cpu())

    return step


def run_one(model: str, mode: str, size: str, target_names: list[str]) -> list[dict]:
    """In this process: two steps of `model` in `mode`, every program checked for the targets."""
    import torch_tpu
    from torch_tpu import targets
    from torch_tpu.targets import report

    torch_tpu.set_eager_mode("strict" if mode == "strict" else "defer_and_fuse")
    step = _llama_step(size, mode) if model == "llama" else _gpt_step(mode)
    with targets.also_compile_for(*target_names) as check:
        step()
        step()
    return report.annotate(check.results())


def summarize(model: str, mode: str, results: list[dict], target_names: list[str]) -> list[dict]:
    rows = []
    for name in target_names:
        mine = [r for r in results if r["target"] == name]
        done = [r for r in mine if r["compiled"]]
        costs = [r.get("costs") or {} for r in done]
        rows.append(
            dict(
                model=model,
                mode=mode,
                target=name,
                programs=len(mine),
                refused=len(mine) - len(done),
                peak_bytes=max((r["memory"]["peak"] for r in done if r["memory"]), default=0),
                flops=sum(c.get("flops", 0.0) for c in costs),
                bytes=sum(c.get("bytes accessed", 0.0) for c in costs) if any(costs) else None,
                roofline_s=sum(r["roofline_s"] or 0.0 for r in done),
                compile_median_s=statistics.median([r["seconds"] for r in mine]) if mine else 0.0,
                compile_total_s=sum(r["seconds"] for r in mine),
            )
        )
    return rows


def table(rows: list[dict]) -> str:
    head = (
        f"{'model':<12} {'mode':<15} {'target':<12} {'programs':>8} {'refused':>7} "
        f"{'peak HBM':>10} {'GFLOP':>9} {'GB moved':>9} {'roofline':>10} "
        f"{'compile/prog':>12} {'compile':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        moved = f"{r['bytes'] / 1e9:.3f}" if r["bytes"] is not None else "-"
        gflop = f"{r['flops'] / 1e9:.3f}" if r["bytes"] is not None else "-"  # no cost analysis
        lines.append(
            f"{r['model']:<12} {r['mode']:<15} {r['target']:<12} {r['programs']:>8} "
            f"{r['refused']:>7} {r['peak_bytes'] / 2**20:>7.1f} MiB {gflop:>9} "
            f"{moved:>9} {r['roofline_s'] * 1e3:>7.3f} ms {r['compile_median_s'] * 1e3:>9.1f} ms "
            f"{r['compile_total_s']:>7.1f}s"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="v5e:1x1,v6e:1x1,tpu7x:1x1x1,h100")
    parser.add_argument("--size", default="small", choices=sorted(LLAMA_SIZES))
    parser.add_argument("--models", default="gpt,llama")
    parser.add_argument("--modes", default="compiled,defer_and_fuse")
    parser.add_argument("--json")
    parser.add_argument("--run-one", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    if args.run_one:
        model, mode = args.run_one
        print("RESULTS " + json.dumps(run_one(model, mode, args.size, names)))
        return 0
    rows = []
    env = dict(os.environ, TORCH_TPU_XLA_CPU_SHORTCUTS="0", PYTHONPATH=ROOT)
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--run-one",
                    model,
                    mode,
                    "--size",
                    args.size,
                    "--targets",
                    ",".join(names),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=3600,
            )
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULTS ")]
            if done.returncode != 0 or not lines:
                print(f"{model} {mode}: failed ({done.returncode})\n{done.stderr[-2000:]}")
                continue
            rows += summarize(model, mode, json.loads(lines[-1][len("RESULTS ") :]), names)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
