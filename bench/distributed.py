"""Benchmarks of torch.distributed on tpu (torch_tpu's c10d backend "tpu"), in one run.

    python bench/distributed.py [--quick] [--repeats 7] [--modes strict,defer_and_fuse]

Launches the ranks itself (separate processes with torchrun's environment: RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; OMP_NUM_THREADS=1,
TORCH_TPU_CPU_DEVICES unset, so each rank gets LOCAL_WORLD_SIZE devices and uses
tpu:LOCAL_RANK), with 60 s process-group timeouts and a deadline on every launch, so a
hang fails instead of blocking. Prints two tables:

1. all_reduce (sum) of float32 tensors on 2 ranks, 4 KB to 64 MB: the bus bandwidth
   (bytes * 2(n-1)/n / time) of tpu tensors through the "tpu" backend and of CPU tensors
   through gloo (a ``dist.new_group(backend="gloo")`` in the same processes), and their
   ratio. The two take turns within every repeat; the time of a repeat is the slowest
   rank's, and the table shows medians. Every timed tpu all_reduce ends with
   ``torch.tpu.synchronize()``, so its result is on the device before the clock stops.
   The tpu numbers include the backend's per-collective agreement check
   (``TORCH_TPU_DIST_CHECK=0`` in the environment skips it).
2. The DistributedDataParallel training step (AdamW) of the small GPT of examples/gpt.py
   (2 layers, width 64) with a fixed global batch of 64 sequences split over 1, 2 and 4
   ranks on tpu, in the strict and defer_and_fuse eager modes: the median ms per step
   (the slowest rank's; every step ends by reading its loss) and the throughput against
   1 rank (its time / this time).

On the CPU PJRT plugin the "tpu" backend stages device data through host memory and
reduces it with gloo, so table 1 measures that staging's cost over plain gloo. And all
ranks are processes sharing the same CPU cores (2 on a small machine): splitting a fixed
global batch over more ranks can at best spread the work over those cores, so the
scaling cannot exceed the number of cores (less the collectives' cost), and it falls
once ranks outnumber cores and compete for them. Table 2 measures DDP's overhead on
this backend, not an accelerator's speed-up. The full run takes 1-2.5 minutes on a
2-core machine (more when it is busy), --quick about a minute.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMEOUT = datetime.timedelta(seconds=60)
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]  # bytes
GLOBAL_BATCH = 64  # sequences per DDP step, split over the ranks
WORLDS = (1, 2, 4)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, args: list[str], deadline: float) -> dict:
    """Runs this file's worker on `world` ranks; returns the result rank 0 prints.
    Fails with every rank's output if a rank fails or the deadline (seconds) passes."""
    base = dict(os.environ)
    base.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        OMP_NUM_THREADS="1",
        PYTHONPATH=ROOT + os.pathsep + base.get("PYTHONPATH", ""),
        PYTHONUNBUFFERED="1",
    )
    base.pop("TORCH_TPU_CPU_DEVICES", None)
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", *args],
            env=dict(base, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    end = time.monotonic() + deadline
    outputs, timed_out = [], False
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            for p in procs:
                p.kill()
            output, _ = proc.communicate()
        outputs.append(output)
    if timed_out or any(p.returncode != 0 for p in procs):
        report = "\n".join(
            f"--- rank {r} (exit {p.returncode}) ---\n{out[-4000:]}"
            for r, (p, out) in enumerate(zip(procs, outputs))
        )
        what = f"still running after {deadline:.0f} s" if timed_out else "failed"
        raise SystemExit(f"{' '.join(args)} on {world} ranks {what}\n{report}")
    for line in outputs[0].splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit(f"rank 0 printed no result:\n{outputs[0][-4000:]}")


# ---- the ranks ------------------------------------------------------------------------


def slowest(samples: list[float], group) -> list[float]:
    """Each sample's maximum over the ranks."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(samples, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def worker_all_reduce(repeats: int, sizes: list[int]) -> dict:
    import torch
    import torch.distributed as dist

    import torch_tpu  # noqa: F401

    dist.init_process_group("tpu", timeout=TIMEOUT)
    world = dist.get_world_size()
    gloo = dist.new_group(backend="gloo", timeout=TIMEOUT)
    result = {"world": world, "sizes": {}}
    for size in sizes:
        n = size // 4
        tensors = {"tpu": torch.ones(n, device="tpu"), "gloo": torch.ones(n)}

        def once(variant: str, tensors=tensors) -> None:
            if variant == "tpu":
                dist.all_reduce(tensors["tpu"])
                torch.tpu.synchronize()
            else:
                dist.all_reduce(tensors["gloo"], group=gloo)

        # One checked call each (the sum of ones over the ranks), then a warm-up.
        for variant in tensors:
            once(variant)
            got = tensors[variant].cpu()
            if not bool((got == world).all()):
                raise AssertionError(f"all_reduce of {size} bytes via {variant}: {got[:4]}")
            tensors[variant].zero_()  # sums of zeros stay finite over all the calls
            once(variant)
        inner = max(1, min(50, (16 << 20) // size))  # calls per repeat
        samples = {variant: [] for variant in tensors}
        for _ in range(repeats):
            for variant in tensors:  # taking turns, so drifts hit both alike
                dist.barrier(group=gloo)
                start = time.perf_counter()
                for _ in range(inner):
                    once(variant)
                samples[variant].append((time.perf_counter() - start) / inner)
        result["sizes"][size] = {v: statistics.median(slowest(s, gloo)) for v, s in samples.items()}
    dist.destroy_process_group()
    return result


def worker_ddp(repeats: int, steps: int, mode: str) -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn import functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gpt import GPT, Config, batches

    import torch_tpu

    dist.init_process_group("tpu", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    cpu_group = dist.new_group(backend="gloo", timeout=TIMEOUT)
    per_rank = GLOBAL_BATCH // world
    torch.manual_seed(0)
    config = Config()
    model = DDP(GPT(config).to("tpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = next(batches(config, batch=GLOBAL_BATCH, steps=1))
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    x, y = x[mine].to("tpu"), y[mine].to("tpu")

    def step() -> None:
        loss = F.cross_entropy(model(x).reshape(-1, config.vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()  # waits for the step, as a loop that logs its loss would

    samples = []
    with torch_tpu.eager_mode(mode):
        for _ in range(3):  # warm-up: compiles, DDP's first-iteration bucketing
            step()
        for _ in range(repeats):
            dist.barrier(group=cpu_group)
            start = time.perf_counter()
            for _ in range(steps):
                step()
            samples.append((time.perf_counter() - start) / steps)
    dist.destroy_process_group()
    return {
        "world": world,
        "per_rank": per_rank,
        "step": statistics.median(slowest(samples, cpu_group)),
    }


def worker(args) -> None:
    if args.worker == "all_reduce":
        result = worker_all_reduce(args.repeats, [int(s) for s in args.sizes.split(",")])
    else:
        result = worker_ddp(args.repeats, args.steps, args.mode)
    if os.environ["RANK"] == "0":
        print("RESULT " + json.dumps(result), flush=True)


# ---- the driver -----------------------------------------------------------------------


def label(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    parser.add_argument("--repeats", type=int, default=None, help="default 7, --quick 3")
    parser.add_argument(
        "--modes", default="strict,defer_and_fuse", help="eager modes of the DDP steps"
    )
    parser.add_argument("--worker", choices=("all_reduce", "ddp"), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="strict", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)
    steps = args.steps or (3 if args.quick else 8)
    if args.worker:
        args.repeats, args.steps = repeats, steps
        return worker(args)
    started = time.monotonic()

    ar = launch(2, ["all_reduce", f"--repeats={repeats}"], 300)
    n = ar["world"]
    print(
        f"| all_reduce, float32, {n} ranks | tpu backend (GB/s) | gloo, CPU (GB/s) | tpu / gloo |"
        " tpu (ms) | gloo (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for size in SIZES:
        t = ar["sizes"][str(size)]
        tpu, gloo = (size * 2 * (n - 1) / n / t[v] / 1e9 for v in ("tpu", "gloo"))
        print(
            f"| {label(size)} | {tpu:.4f} | {gloo:.4f} | {tpu / gloo:.2f} | "
            f"{t['tpu'] * 1e3:.2f} | {t['gloo'] * 1e3:.2f} |"
        )

    for mode in args.modes.split(","):
        print(
            f"\n| DDP GPT step ({mode}), global batch {GLOBAL_BATCH}x32 | batch per rank |"
            " ms/step | throughput vs 1 rank |"
        )
        print("|---|---:|---:|---:|")
        base = None
        for world in WORLDS:
            r = launch(
                world, ["ddp", f"--repeats={repeats}", f"--steps={steps}", f"--mode={mode}"], 300
            )
            ms, base = r["step"] * 1e3, base or r["step"] * 1e3
            print(f"| {world} rank(s) | {r['per_rank']} | {ms:.1f} | {base / ms:.2f}x |")

    print(
        f"\nmedians of {repeats} repeats ({steps} DDP steps each); ranks are processes on this "
        f"machine's {os.cpu_count()} cores, OMP_NUM_THREADS=1; {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
