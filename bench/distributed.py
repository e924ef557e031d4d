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

3. all_reduce (sum) of float32 tensors on 4 ranks in this process (one thread per rank,
   each on its own device: ``torch_tpu.distributed.testing.run_threaded``): the xla
   collective engine (a replicated StableHLO all_reduce launched by every rank on its
   own device) against the host-staging gloo engine, groups of both engines in the same
   run taking turns, medians of the slowest rank.
4. An estimate, not a measurement: ring all_reduce time on a simulated torus
   (``--topology``, default 4x4) for the rank order that ``topology_aware_mesh`` gives and
   for plain rank order, from ``topology.ring_all_reduce_seconds`` (2(n-1) steps of
   hops * (bytes/n / link bandwidth + link latency); ``--link-gbps``, ``--hop-us``).
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

# Table 3 runs 4 ranks in this process, one per device, whatever the core count (the CPU
# plugin's default is one device per core); torchrun children get their own count.
os.environ.setdefault("TORCH_TPU_CPU_DEVICES", "4")

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


def threaded_all_reduce(repeats: int, sizes: list[int]) -> dict:
    """Table 3: seconds per all_reduce and per send/recv ring step (each rank sends to the
    next and receives from the previous, batch_isend_irecv) by size and engine, 4 rank
    threads."""
    import threading

    import torch
    import torch.distributed as dist

    import torch_tpu.distributed
    from torch_tpu.distributed.testing import run_threaded

    world = min(4, torch.tpu.device_count())
    turn = threading.Barrier(world)

    def rank_main(rank: int) -> dict:
        groups = {"xla": dist.group.WORLD}
        # The engine is chosen when a group is made: rank 0 switches the variable while
        # the others wait, then all make the gloo-engine group.
        if rank == 0:
            os.environ["TORCH_TPU_COLLECTIVES"] = "host"
        turn.wait()
        groups["host"] = dist.new_group(list(range(world)))
        turn.wait()
        if rank == 0:
            os.environ["TORCH_TPU_COLLECTIVES"] = "xla"
        names = {v: torch_tpu.distributed.engine_name(g) for v, g in groups.items()}
        assert names == {"xla": "xla", "host": "host_staging(gloo)"}, names
        out = {}
        ring_out = {}

        def ring(t, received, group) -> None:
            group_rank = dist.get_rank(group)
            peers = [(group_rank + 1) % world, (group_rank - 1) % world]
            ops = [
                dist.P2POp(dist.isend, t, dist.get_global_rank(group, peers[0]), group),
                dist.P2POp(dist.irecv, received, dist.get_global_rank(group, peers[1]), group),
            ]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        for size in sizes:
            t = torch.ones(size // 4, device=f"tpu:{rank}")
            received = torch.empty_like(t)
            for group in groups.values():  # checked once, then a warm-up
                t.fill_(1.0)
                dist.all_reduce(t, group=group)
                if not bool((t.cpu() == world).all()):
                    raise AssertionError(f"all_reduce of {size} bytes gave {t[:4].cpu()}")
                t.zero_()
                dist.all_reduce(t, group=group)
            inner = max(1, min(20, (4 << 20) // size))
            samples = {v: [] for v in groups}
            for _ in range(repeats):
                for variant, group in groups.items():
                    turn.wait()
                    start = time.perf_counter()
                    for _ in range(inner):
                        dist.all_reduce(t, group=group)
                    torch.tpu.synchronize()
                    samples[variant].append((time.perf_counter() - start) / inner)
            out[size] = samples
            for group in groups.values():  # checked once
                t.fill_(float(rank))
                ring(t, received, group)
                if not bool((received.cpu() == (rank - 1) % world).all()):
                    raise AssertionError(f"ring of {size} bytes gave {received[:4].cpu()}")
            ring_samples = {v: [] for v in groups}
            for _ in range(repeats):
                for variant, group in groups.items():
                    turn.wait()
                    start = time.perf_counter()
                    for _ in range(inner):
                        ring(t, received, group)
                    torch.tpu.synchronize()
                    ring_samples[variant].append((time.perf_counter() - start) / inner)
            ring_out[size] = ring_samples
        return {"all_reduce": out, "ring": ring_out}

    os.environ["TORCH_TPU_COLLECTIVES"] = "xla"
    try:
        ranks = run_threaded(rank_main, world, timeout=600)
    finally:
        os.environ.pop("TORCH_TPU_COLLECTIVES", None)
    tables = {}
    for kind in ("all_reduce", "ring"):
        tables[kind] = {
            size: {
                v: statistics.median(
                    max(r[kind][size][v][i] for r in ranks) for i in range(repeats)
                )
                for v in ("xla", "host")
            }
            for size in sizes
        }
    return {"world": world, "sizes": tables["all_reduce"], "ring": tables["ring"]}


def topology_estimate(topology: str, link_gbps: float, hop_us: float) -> None:
    """Table 4: the cost model on a simulated torus."""
    import math

    import torch

    from torch_tpu.distributed import topology as topo

    torus = topo.parse_topology(topology)
    n = math.prod(torus)
    coords = []
    for rank in range(n):  # x fastest, as TPU device ids go
        point, index = [], rank
        for t in torus:
            index, x = divmod(index, t)
            point.append(x)
        coords.append(tuple(point))
    aware = topo.mesh_from_coordinates(coords, torus, (n,))
    hops = {
        "topology_aware_mesh": topo.ring_hops(aware, coords, torus),
        "rank order": topo.ring_hops(torch.arange(n).reshape(1, n), coords, torus),
    }
    print(
        f"\n| ring all_reduce estimate, {n} chips on a {topology} torus "
        f"({link_gbps:g} GB/s links, {hop_us:g} us/hop) | topology_aware_mesh "
        f"({hops['topology_aware_mesh']} hop) (ms) | rank order ({hops['rank order']} hops) (ms)"
        " | rank order / aware |"
    )
    print("|---|---:|---:|---:|")
    for size in SIZES:
        t = {
            k: topo.ring_all_reduce_seconds(size, n, link_gbps, hop_us * 1e-6, h)
            for k, h in hops.items()
        }
        aware_ms, naive_ms = t["topology_aware_mesh"] * 1e3, t["rank order"] * 1e3
        print(f"| {label(size)} | {aware_ms:.3f} | {naive_ms:.3f} | {naive_ms / aware_ms:.2f} |")


def label(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    parser.add_argument("--repeats", type=int, default=None, help="default 7, --quick 3")
    parser.add_argument(
        "--modes", default="strict,defer_and_fuse", help="eager modes of the DDP steps"
    )
    parser.add_argument("--topology", default="4x4", help="torus of the estimate (table 4)")
    parser.add_argument("--link-gbps", type=float, default=45.0, help="GB/s per ICI link")
    parser.add_argument("--hop-us", type=float, default=1.0, help="latency per link hop, us")
    parser.add_argument(
        "--only", default="", help="comma list of tables to run: staging,ddp,threads,estimate"
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
    only = set(filter(None, args.only.split(","))) or {"staging", "ddp", "threads", "estimate"}
    if "staging" in only:
        staging_table(repeats)
    if "ddp" in only:
        ddp_tables(args.modes, repeats, steps)
    if "threads" in only:
        threads_table(repeats, SIZES[:-1] if args.quick else SIZES)
    if "estimate" in only:
        topology_estimate(args.topology, args.link_gbps, args.hop_us)
    print(
        f"\nmedians of {repeats} repeats ({steps} DDP steps each); ranks are processes (tables"
        f" 1-2) or threads (table 3) on this machine's {os.cpu_count()} cores, "
        f"OMP_NUM_THREADS=1; {time.monotonic() - started:.0f} s"
    )


def threads_table(repeats: int, sizes: list[int]) -> None:
    r = threaded_all_reduce(repeats, sizes)
    n = r["world"]
    print(
        f"\n| all_reduce, float32, {n} rank threads in one process | xla engine (GB/s) |"
        " host-staging gloo engine (GB/s) | xla / gloo | xla (ms) | gloo (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for size in sizes:
        t = r["sizes"][size]
        xla, gloo = (size * 2 * (n - 1) / n / t[v] / 1e9 for v in ("xla", "host"))
        print(
            f"| {label(size)} | {xla:.4f} | {gloo:.4f} | {xla / gloo:.2f} | "
            f"{t['xla'] * 1e3:.2f} | {t['host'] * 1e3:.2f} |"
        )
    print(
        f"\n| send/recv ring step (batch_isend_irecv), {n} rank threads | xla engine (GB/s) |"
        " host-staging gloo engine (GB/s) | xla / gloo | xla (ms) | gloo (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for size in sizes:
        t = r["ring"][size]
        xla, gloo = (size / t[v] / 1e9 for v in ("xla", "host"))
        print(
            f"| {label(size)} | {xla:.4f} | {gloo:.4f} | {xla / gloo:.2f} | "
            f"{t['xla'] * 1e3:.2f} | {t['host'] * 1e3:.2f} |"
        )


def staging_table(repeats: int) -> None:
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


def ddp_tables(modes: str, repeats: int, steps: int) -> None:
    for mode in modes.split(","):
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


if __name__ == "__main__":
    main()
