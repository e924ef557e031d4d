"""torch.compile(backend="tpu") on the example GPT's training step, against the eager
modes, PyTorch CPU eager and torch.compile with Inductor on the CPU, all in one run;
then the time to the first compiled step in a fresh process, with a cold and a warm
compile cache (TORCH_TPU_CACHE_DIR in a temporary directory).

    python bench/compile.py [--repeats 5] [--threads N] [--steps-per-sync 5]
        [--sections gpt,host,first,warmstart,newshape]

Sections: `gpt` the training step; `host` the host time per compiled call of a chain
of 10, 100 and 1000 small elementwise ops (replayed, with replay off, and Inductor);
`first` the time to the first compiled step in a fresh process; `warmstart` that time
with cold caches (empty TORCHINDUCTOR_CACHE_DIR and TORCH_TPU_CACHE_DIR) and warm ones
(a second fresh process on the same directories), for the tpu backend with and without
PyTorch's AOTAutograd cache (TORCH_TPU_AOT_CACHE) and for Inductor on the CPU,
interleaved, median of --repeats (at least 3); `newshape` the compile time of a one-op
eager program met with a new shape (disk cache off): by default a small op's first
version is compiled without LLVM's optimizations (it is replaced by an optimized one after
16 runs); against the options of a graph (TORCH_TPU_FAST_OP_COMPILE=0).

The compiled step is the whole training step (forward, backward, AdamW's step and
zero_grad) under one torch.compile. Ratios are against PyTorch CPU eager (> 1 is slower).
Each timed run of the `gpt` section is --steps-per-sync steps followed by a wait for the
device, as a loop that reads its loss that often: after each wait the device idles while
the host records the next step, which the asynchronous modes (compiled, defer_and_fuse)
pay and CPU eager does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_START = time.perf_counter()

import torch  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "examples")]
from run import gpt_step as eager_gpt_step  # noqa: E402
from run import timed  # noqa: E402

import torch_tpu  # noqa: E402

CASES = [
    # (label, device, eager mode or None, torch.compile backend or None)
    ("tpu, torch.compile(backend='tpu')", "tpu", None, "tpu"),
    ("tpu, torch.compile(backend='tpu'), replay off", "tpu", None, "tpu-no-replay"),
    ("tpu, strict eager", "tpu", "strict", None),
    ("tpu, defer_and_fuse eager", "tpu", "defer_and_fuse", None),
    ("CPU, PyTorch eager", "cpu", None, None),
    ("CPU, torch.compile(backend='inductor')", "cpu", None, "inductor"),
]


class replay_off:
    """Graphs compiled inside this block record every call (TORCH_TPU_COMPILE_REPLAY=0)."""

    def __enter__(self):
        os.environ["TORCH_TPU_COMPILE_REPLAY"] = "0"

    def __exit__(self, *exc):
        os.environ.pop("TORCH_TPU_COMPILE_REPLAY", None)


def compiled(fn, backend: str):
    """torch.compile(fn) with `backend`; "tpu-no-replay" is the tpu backend with replay
    off, compiled at the first call (which is when the setting is read)."""
    if backend != "tpu-no-replay":
        return torch.compile(fn, backend=backend)
    inner = torch.compile(fn, backend="tpu")

    def call(*args):
        with replay_off():
            return inner(*args)

    return call


def gpt_step(device: str, backend: str | None):
    """bench/run.py's GPT training step (2 layers, width 64, batch 16x32), compiled with
    `backend` when one is given."""
    step, _ = eager_gpt_step(device)
    return compiled(step, backend) if backend else step


def op_chain(device: str, ops: int, backend: str):
    """A compiled chain of `ops` elementwise ops on 128 floats: its time per call is host
    time (the device work is tiny)."""
    x = torch.randn(128, device=device)

    def chain(y):
        for i in range(ops):
            y = y * 1.0001 if i % 2 else y + 0.001
        return y

    fn = compiled(chain, backend)
    return lambda: fn(x)


def host_time_table(repeats: int) -> None:
    variants = [
        ("tpu, replayed", "tpu", "tpu"),
        ("tpu, replay off", "tpu", "tpu-no-replay"),
        ("CPU, Inductor", "cpu", "inductor"),
    ]
    sizes = (10, 100, 1000)
    times = {}
    for ops in sizes:
        for label, device, backend in variants:
            torch._dynamo.reset()
            times[label, ops] = timed(op_chain(device, ops, backend), device, repeats, inner=20)
    columns = " | ".join(f"{n} ops" for n in sizes)
    print(f"\n| host time per compiled call (us) | {columns} | 1000 / 10 |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for label, _, _ in variants:
        cells = " | ".join(f"{times[label, n] * 1e6:.0f}" for n in sizes)
        print(f"| {label} | {cells} | {times[label, 1000] / times[label, 10]:.1f} |")


def measure(
    device: str, mode: str | None, backend: str | None, repeats: int, steps: int = 5
) -> float:
    if mode is None:
        return timed(gpt_step(device, backend), device, repeats, inner=steps)
    with torch_tpu.eager_mode(mode):
        return timed(gpt_step(device, backend), device, repeats, inner=steps)


def first_step(backend: str = "tpu") -> None:
    """In a fresh process: seconds from start to the first compiled step's loss, with
    `backend` ("inductor" runs on the CPU), and what the compile caches did."""
    from torch._dynamo.utils import counters

    begin = time.perf_counter()
    loss = gpt_step("cpu" if backend == "inductor" else "tpu", backend)().item()
    now = time.perf_counter()
    stats = torch_tpu.metrics.snapshot()
    aot = counters["aot_autograd"]
    print(
        json.dumps(
            {
                "total": now - _START,
                "first_step": now - begin,
                "compiles": stats["compiles"],
                "compile_seconds": stats["compile_seconds"],
                "aot_hits": aot["autograd_cache_hit"],
                "aot_misses": aot["autograd_cache_miss"] + aot["autograd_cache_bypass"],
                "loss": loss,
            }
        )
    )


def fresh_process(flag: str, env: dict, *args: str) -> dict:
    """The JSON line this script prints when run with `flag` (and `args`) in a new
    process."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), flag, *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


NEW_SHAPE_OPS = {
    "add": lambda x: x + x,
    "mul by scalar": lambda x: x * 3.0,
    "sin": torch.sin,
    "sum over rows": lambda x: x.sum(1),
    "softmax": lambda x: x.softmax(1),
    "sort": lambda x: x.sort(1)[0],
    "matmul": lambda x: x @ x.t(),
}


def new_shape_compiles() -> None:
    """In a fresh process: median compile ms of each op over 9 new shapes."""
    results = {}
    for index, (name, op) in enumerate(NEW_SHAPE_OPS.items()):
        samples = []
        for i in range(9):
            x = torch.randn(3 + i, 5 + 2 * i + 20 * index, device="tpu")
            torch.tpu.synchronize()
            before = torch_tpu.metrics.snapshot()
            op(x)
            torch.tpu.synchronize()
            after = torch_tpu.metrics.snapshot()
            assert after["compiles"] - before["compiles"] == 1, name
            samples.append((after["compile_seconds"] - before["compile_seconds"]) * 1e3)
        results[name] = statistics.median(samples)
    print(json.dumps(results))


def new_shape_table(repeats: int) -> None:
    variants = {"default (tiered: quick first)": "1", "graph options (=0)": "0"}
    samples = {variant: [] for variant in variants}
    for _ in range(max(1, repeats // 2)):
        for variant, fast in variants.items():  # interleaved: drifts hit both alike
            env = dict(os.environ, TORCH_TPU_CACHE_DIR="off", TORCH_TPU_FAST_OP_COMPILE=fast)
            samples[variant].append(fresh_process("--new-shapes", env))
    print(
        "\n| new-shape eager op: compile ms (median) | "
        + " | ".join(variants)
        + " | default / graph |"
    )
    print("|---|" + "---:|" * (len(variants) + 1))
    for name in NEW_SHAPE_OPS:
        medians = [statistics.median(run[name] for run in samples[v]) for v in variants]
        cells = " | ".join(f"{m:.1f}" for m in medians)
        print(f"| {name} | {cells} | {medians[0] / medians[-1]:.2f} |")


def cache_dirs(root: str) -> dict:
    """The environment of a process whose compile caches (torch_tpu's, and PyTorch's
    Inductor and AOTAutograd caches) are under `root`: empty there means cold."""
    return dict(
        os.environ,
        TORCH_TPU_CACHE_DIR=os.path.join(root, "torch_tpu"),
        TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"),
    )


def cold_and_warm() -> list[dict]:
    with tempfile.TemporaryDirectory() as root:
        env = cache_dirs(root)
        return [fresh_process("--first-step", env) for _ in ("cold", "warm")]


WARM_START_VARIANTS = [
    # (label, torch.compile backend, extra environment)
    ("tpu, AOTAutograd cache on", "tpu", {"TORCH_TPU_AOT_CACHE": "1"}),
    ("tpu (default: cache off)", "tpu", {"TORCH_TPU_AOT_CACHE": "0"}),
    ("CPU, Inductor", "inductor", {}),
]


def warm_start_table(repeats: int) -> None:
    """Time to the first compiled GPT training step in fresh processes, cold and warm."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(max(3, repeats)):
        for label, backend, extra in WARM_START_VARIANTS:  # interleaved: drifts hit all
            with tempfile.TemporaryDirectory() as root:
                env = dict(cache_dirs(root), **extra)
                for phase in ("cold", "warm"):
                    run = fresh_process("--first-step", env, "--backend", backend)
                    runs.setdefault((label, phase), []).append(run)

    def median(label: str, phase: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[label, phase])

    inductor = {phase: median("CPU, Inductor", phase, "first_step") for phase in ("cold", "warm")}
    print(
        "\n| first compiled GPT step, fresh process (s) | cold | warm | cold / warm "
        "| cold / Inductor's | warm / Inductor's | process total cold, warm "
        "| AOTAutograd hits (warm) |"
    )
    print("|---|" + "---:|" * 7)
    for label, _, _ in WARM_START_VARIANTS:
        cold, warm = median(label, "cold", "first_step"), median(label, "warm", "first_step")
        hits = median(label, "warm", "aot_hits")
        print(
            f"| {label} | {cold:.2f} | {warm:.2f} | {cold / warm:.2f} "
            f"| {cold / inductor['cold']:.2f} | {warm / inductor['warm']:.2f} "
            f"| {median(label, 'cold', 'total'):.2f}, {median(label, 'warm', 'total'):.2f} "
            f"| {hits:.0f} |"
        )
    print(
        f"\nmedian of {max(3, repeats)} cold/warm pairs; first step: building the model, "
        "compiling and running one training step (forward, backward, AdamW) to its loss"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="PyTorch's CPU threads (use 1 on a busy machine: contended threads spin)",
    )
    parser.add_argument("--sections", default="gpt,host,first,warmstart,newshape")
    parser.add_argument(
        "--steps-per-sync",
        type=int,
        default=5,
        help="gpt: training steps between two waits for the device (a loss read)",
    )
    parser.add_argument("--first-step", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="tpu", help=argparse.SUPPRESS)
    parser.add_argument("--new-shapes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_step:
        first_step(args.backend)
        return
    if args.new_shapes:
        new_shape_compiles()
        return
    torch.set_num_threads(args.threads)
    sections = args.sections.split(",")
    if "gpt" in sections:
        gpt_table(args.repeats, args.steps_per_sync)
    if "host" in sections:
        host_time_table(args.repeats)
    if "first" in sections:
        first_step_table()
    if "warmstart" in sections:
        warm_start_table(args.repeats)
    if "newshape" in sections:
        new_shape_table(args.repeats)


def gpt_table(repeats: int, steps: int = 5) -> None:
    times = {}
    for label, device, mode, backend in CASES:
        times[label] = measure(device, mode, backend, repeats, steps)
    cpu = times["CPU, PyTorch eager"]
    print("| GPT training step (2 layers, width 64, batch 16x32) | ms | / CPU eager |")
    print("|---|---:|---:|")
    for label, seconds in times.items():
        print(f"| {label} | {seconds * 1e3:.2f} | {seconds / cpu:.2f} |")
    print(
        f"\nmedian of {repeats} repeats of {steps} steps, then a wait for the device; "
        f"{torch_tpu.platform()} platform, "
        f"{torch.get_num_threads()} CPU threads"
    )


def first_step_table() -> None:
    print("\n| first compiled step, fresh process | total (s) | first step (s) | compiles |")
    print("|---|---:|---:|---|")
    for name, run in zip(("cold cache", "warm cache"), cold_and_warm()):
        print(
            f"| {name} | {run['total']:.2f} | {run['first_step']:.2f} | {run['compiles']} "
            f"({run['compile_seconds']:.2f} s compiling) |"
        )


if __name__ == "__main__":
    main()
