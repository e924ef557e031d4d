"""The smoke set of scripts/accelerator_check.sh: what a user does first on a new machine,
each check compared with PyTorch on the CPU, run on whatever platform torch_tpu starts on.

    python scripts/accelerator_smoke.py [--only NAME,...]

Prints one line per check (PASS or FAIL with what differed) and a summary; the exit
status is the number of failed checks. A check that fails does not stop the others.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import time
import traceback

import torch

import torch_tpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

TPU = torch.device("tpu")
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def close(actual: torch.Tensor, expected: torch.Tensor, **tolerance) -> None:
    torch.testing.assert_close(actual.cpu(), expected, **tolerance)


@check
def ops_match_the_cpu():
    torch.manual_seed(0)
    a, b = torch.randn(64, 96), torch.randn(96, 48)
    image, kernel = torch.randn(2, 3, 16, 16), torch.randn(8, 3, 3, 3)
    q, k, v = (torch.randn(2, 4, 32, 16) for _ in range(3))
    cases = {
        "matmul": lambda d: a.to(d) @ b.to(d),
        "add bf16": lambda d: (a.to(d).bfloat16() + 1.5).float(),
        "softmax": lambda d: torch.softmax(a.to(d), dim=-1),
        "layer_norm": lambda d: torch.nn.functional.layer_norm(a.to(d), (96,)),
        "sum/cumsum": lambda d: torch.cat([a.to(d).sum(0), a.to(d).cumsum(1)[0]]),
        "sort": lambda d: torch.sort(a.to(d), dim=1).values,
        "argmax int64": lambda d: a.to(d).argmax(1) * 3 - 7,
        "conv2d": lambda d: torch.nn.functional.conv2d(image.to(d), kernel.to(d), padding=1),
        "sdpa causal": lambda d: torch.nn.functional.scaled_dot_product_attention(
            q.to(d), k.to(d), v.to(d), is_causal=True
        ),
        "where/masked": lambda d: torch.where(a.to(d) > 0, a.to(d), torch.zeros((), device=d)),
    }
    for name, fn in cases.items():
        try:
            close(fn(TPU), fn(torch.device("cpu")), rtol=2e-3, atol=2e-3)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


@check
def float32_matmul_is_full_float32():
    # PyTorch's default ("highest") promises float32 products: TF32 would miss by ~1e-3.
    torch.manual_seed(0)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    exact = (a.double() @ b.double()).float()
    close(a.to(TPU) @ b.to(TPU), exact, rtol=1e-5, atol=1e-4)


@check
def views_share_storage_like_the_cpu():
    def run(device):
        x = torch.arange(24.0, device=device).reshape(2, 3, 4)
        y = x.transpose(0, 2)[1:, ::2]
        y.mul_(10)
        x[0].add_(1)
        return x, y, y.stride(), y.is_contiguous()

    tpu, cpu = run(TPU), run(torch.device("cpu"))
    close(tpu[0], cpu[0])
    close(tpu[1], cpu[1])
    assert tpu[2:] == cpu[2:], f"strides/contiguity {tpu[2:]} != {cpu[2:]}"


@check
def random_numbers_repeat_with_the_seed():
    torch.manual_seed(7)
    first = torch.rand(4096, device=TPU)
    torch.manual_seed(7)
    second = torch.rand(4096, device=TPU)
    assert torch.equal(first.cpu(), second.cpu()), "same seed, different numbers"
    mean = float(first.mean())
    assert 0.45 < mean < 0.55, f"uniform mean {mean}"
    dropped = torch.nn.functional.dropout(torch.ones(10000, device=TPU), 0.3)
    zeros = float((dropped == 0).float().mean())
    assert 0.27 < zeros < 0.33, f"dropout(0.3) zeroed {zeros}"


def train_gpt(device, mode: str | None, steps: int = 3) -> list[float]:
    from gpt import GPT, Config, batches

    torch.manual_seed(0)
    model = GPT(Config()).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="tpu") if mode == "compiled" else model
    losses = []
    for tokens, targets in batches(Config(), batch=4, steps=steps, seed=0):
        logits = forward(tokens.to(device))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses


def gpt_in(mode: str):
    expected = train_gpt(torch.device("cpu"), None)
    with torch_tpu.eager_mode("defer_and_fuse" if mode == "compiled" else mode):
        actual = train_gpt(TPU, mode)
    torch.testing.assert_close(torch.tensor(actual), torch.tensor(expected), rtol=1e-3, atol=1e-3)


@check
def gpt_example_strict():
    gpt_in("strict")


@check
def gpt_example_debug():
    gpt_in("debug")


@check
def gpt_example_defer_and_fuse():
    gpt_in("defer_and_fuse")


@check
def gpt_example_compiled():
    gpt_in("compiled")


@check
def memory_api_agrees_with_allocations():
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total, f"mem_get_info {free, total}"
    assert torch.tpu.get_device_properties(0).total_memory == total
    before = torch.tpu.memory_allocated()
    x = torch.empty(16 << 20, dtype=torch.uint8, device=TPU)
    grown = torch.tpu.memory_allocated() - before
    assert grown >= 16 << 20, f"16 MiB allocated, memory_allocated grew by {grown}"
    del x
    assert torch.tpu.memory_allocated() == before, "memory_allocated did not fall back"


@check
def out_of_memory_raises_and_the_device_recovers():
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device=TPU)
    except torch.OutOfMemoryError as error:
        assert "out of memory" in str(error), str(error)
    else:
        raise AssertionError("a 1 PiB allocation did not raise torch.OutOfMemoryError")
    close(torch.ones(1000, device=TPU).sum(), torch.tensor(1000.0))


@check
def a_bad_index_raises_index_error():
    x = torch.arange(4.0, device=TPU)
    with torch_tpu.eager_mode("strict"):
        try:
            x[torch.tensor([10], device=TPU)]
            torch.tpu.synchronize()
        except IndexError as error:
            assert "out of bounds" in str(error), str(error)
        else:
            raise AssertionError("index 10 of a size-4 tensor did not raise IndexError")
    close(x + 1, torch.arange(1.0, 5.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated check names")
    args = parser.parse_args()
    faulthandler.enable()
    names = args.only.split(",") if args.only else list(CHECKS)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; choose from {list(CHECKS)}")
    info = torch_tpu._C._plugin_info()
    print(
        f"torch {torch.__version__}, torch_tpu on {info['platform_name']} "
        f"(PJRT API {info['api_version']}, {torch.tpu.device_count()} device(s), "
        f"XLA:CPU shortcuts {'on' if info.get('xla_cpu_shortcuts') else 'off'})",
        flush=True,
    )
    failed = 0
    for name in names:
        start = time.perf_counter()
        try:
            CHECKS[name]()
            verdict = "PASS"
        except Exception as error:  # each check reports and the next one runs
            failed += 1
            where = traceback.extract_tb(error.__traceback__)[-1]
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            verdict = f"FAIL {type(error).__name__}: {first[:160]} (line {where.lineno})"
        print(
            f"{verdict[:4]} {name:<48} {time.perf_counter() - start:6.1f} s {verdict[4:]}",
            flush=True,
        )
    print(f"smoke: {len(names) - failed} of {len(names)} checks passed")
    return failed


if __name__ == "__main__":
    sys.exit(main())
