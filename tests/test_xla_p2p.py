"""send/recv of tpu tensors on the xla collective engine: each message one XLA
collective_permute program over the two ranks' devices, run for real by the CPU plugin
with one thread per rank (torch_tpu.distributed.testing.run_threaded). Every result is
checked against values computed in one process, and against the gloo engine's."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import torch_tpu.eager
import torch_tpu.metrics
from torch_tpu.distributed.testing import run_threaded

pytestmark = pytest.mark.skipif(
    torch.tpu.device_count() < 4, reason="needs 4 tpu devices (TORCH_TPU_CPU_DEVICES)"
)

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64]


def values(seed: int, dtype: torch.dtype, shape=(3, 5)) -> torch.Tensor:
    """Distinct values per seed, computed on the CPU."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=g).to(dtype)


def p2p_counts() -> tuple[int, int]:
    ops = torch_tpu.metrics.snapshot()["native_ops"]
    return ops.get("c10d::send", 0), ops.get("c10d::recv", 0)


def run_on(monkeypatch, engine: str, fn, world: int, *args):
    """fn's results by rank, and how many messages went as XLA programs meanwhile."""
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", engine)
    before = p2p_counts()
    results = run_threaded(fn, world, *args, timeout=60)
    after = p2p_counts()
    return results, (after[0] - before[0], after[1] - before[1])


# Two ranks: every dtype, both directions, views, several messages, tags.

MESSAGES = 4


def pair_exchange(rank: int) -> dict[str, torch.Tensor]:
    device = f"tpu:{rank}"
    peer = 1 - rank
    got = {}
    for i, dtype in enumerate(DTYPES):
        # 0 -> 1 then 1 -> 0, shapes differing by direction.
        for sender, shape in ((0, (3, 5)), (1, (7,))):
            key = f"{dtype}:{sender}->{1 - sender}"
            if rank == sender:
                dist.send(values(10 * i + sender, dtype, shape).to(device), peer)
            else:
                out = torch.zeros(shape, dtype=dtype, device=device)
                dist.recv(out, peer)
                got[key] = out.cpu()
    # A non-contiguous source (another device than the rank's) into a non-contiguous,
    # offset destination view: only the view's elements change.
    if rank == 0:
        source = values(99, torch.float32, (5, 3)).to("tpu:3").t()
        dist.send(source, 1)
    else:
        base = torch.full((5, 6), -1.0, device=device)
        dist.recv(base.t()[1:4], 0)
        got["view"] = base.cpu()
    # Several messages in a row between the pair, each waited in turn on the receiver.
    if rank == 0:
        works = [dist.isend(torch.full((4,), float(m), device=device), 1) for m in range(MESSAGES)]
        for w in works:
            w.wait()
    else:
        inbox = []
        for _ in range(MESSAGES):
            out = torch.empty(4, device=device)
            dist.recv(out, 0)
            inbox.append(out.cpu())
        got["in_order"] = torch.stack(inbox)
    # Tags: sent 7 then 3, received 3 then 7.
    if rank == 0:
        works = [
            dist.isend(torch.full((2,), 7.0, device=device), 1, tag=7),
            dist.isend(torch.full((2,), 3.0, device=device), 1, tag=3),
        ]
    else:
        three, seven = torch.empty(2, device=device), torch.empty(2, device=device)
        works = [dist.irecv(three, 0, tag=3), dist.irecv(seven, 0, tag=7)]
    for w in works:
        w.wait()
    if rank == 1:
        got["tags"] = torch.stack([three.cpu(), seven.cpu()])
    return got


def test_send_recv_pairs_equal_cpu_values_and_gloo(monkeypatch):
    xla, (sends, recvs) = run_on(monkeypatch, "xla", pair_exchange, 2)
    gloo, on_gloo = run_on(monkeypatch, "host", pair_exchange, 2)
    messages = 2 * len(DTYPES) + 1 + MESSAGES + 2
    assert (sends, recvs) == (messages, messages)  # every message was an XLA program
    assert on_gloo == (0, 0)
    for i, dtype in enumerate(DTYPES):
        expected = {0: values(10 * i, dtype, (3, 5)), 1: values(10 * i + 1, dtype, (7,))}
        for sender in (0, 1):
            key = f"{dtype}:{sender}->{1 - sender}"
            got = xla[1 - sender][key]
            assert got.dtype == dtype
            assert torch.equal(got, expected[sender]), key
            assert torch.equal(got, gloo[1 - sender][key]), key
    view = torch.full((5, 6), -1.0)
    view.t()[1:4] = values(99, torch.float32, (5, 3)).t()
    assert torch.equal(xla[1]["view"], view)
    assert torch.equal(xla[1]["in_order"], torch.arange(4.0).repeat_interleave(4).reshape(4, 4))
    assert torch.equal(xla[1]["tags"], torch.tensor([[3.0, 3.0], [7.0, 7.0]]))
    for key in ("view", "in_order", "tags"):
        assert torch.equal(xla[1][key], gloo[1][key]), key


# Four ranks: rings of isend/irecv that deadlock if a send blocks before the receives post.

WORLD = 4


def rings(rank: int) -> dict[str, torch.Tensor]:
    device = f"tpu:{rank}"
    nxt, prev = (rank + 1) % WORLD, (rank - 1) % WORLD
    x = values(rank, torch.float32, (6,)).to(device)
    from_prev = torch.empty(6, device=device)
    ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, from_prev, prev)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    # Both ways round at once, in two dtypes, into a non-contiguous view.
    y = values(rank, torch.int64, (2, 3)).to(device)
    z = values(rank, torch.bfloat16, (4,)).to(device)
    base = torch.zeros((3, 2), dtype=torch.int64, device=device)
    from_next = torch.empty(4, dtype=torch.bfloat16, device=device)
    ops = [
        dist.P2POp(dist.irecv, base.t(), prev),
        dist.P2POp(dist.isend, z, prev),
        dist.P2POp(dist.isend, y, nxt),
        dist.P2POp(dist.irecv, from_next, nxt),
    ]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return {"ring": from_prev.cpu(), "view": base.cpu(), "reverse": from_next.cpu()}


def test_batch_isend_irecv_rings_of_four_ranks(monkeypatch):
    xla, (sends, recvs) = run_on(monkeypatch, "xla", rings, WORLD)
    gloo, _ = run_on(monkeypatch, "host", rings, WORLD)
    assert (sends, recvs) == (3 * WORLD, 3 * WORLD)
    for rank in range(WORLD):
        prev, nxt = (rank - 1) % WORLD, (rank + 1) % WORLD
        got = xla[rank]
        assert torch.equal(got["ring"], values(prev, torch.float32, (6,)))
        assert torch.equal(got["view"], values(prev, torch.int64, (2, 3)).t())
        assert torch.equal(got["reverse"], values(nxt, torch.bfloat16, (4,)))
        for key, value in got.items():
            assert torch.equal(value, gloo[rank][key]), (rank, key)


# Every eager mode: the message is taken when isend is called, and lands in a view.


def in_mode(rank: int, mode: str) -> torch.Tensor:
    with torch_tpu.eager.thread_eager_mode(mode):
        device = f"tpu:{rank}"
        if rank == 0:
            t = torch.arange(12.0, device=device).reshape(3, 4) * 2 + 1
            work = dist.isend(t.t(), 1)
            t.add_(100)  # after isend: not what is sent
            work.wait()
            return t.cpu()
        base = torch.ones(4, 4, device=device)
        dist.recv(base[:, 1:], 0)
        return (base * 2).cpu()


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_each_eager_mode(monkeypatch, mode):
    results, counts = run_on(monkeypatch, "xla", in_mode, 2, mode)
    sent = torch.arange(12.0).reshape(3, 4) * 2 + 1
    expected = torch.ones(4, 4)
    expected[:, 1:] = sent.t()
    assert torch.equal(results[1], expected * 2)
    assert torch.equal(results[0], sent + 100)
    assert counts == (1, 1)


# Mismatches: a clear error on both ranks, and the pair still works afterwards.


def mismatched(rank: int) -> tuple[str, str, torch.Tensor | None]:
    device = f"tpu:{rank}"
    errors = []
    for sent, expected in (
        (torch.ones(6, device=device), torch.empty(6, dtype=torch.int64, device=device)),
        (torch.ones(6, device=device), torch.empty(5, device=device)),
    ):
        try:
            if rank == 0:
                dist.send(sent, 1)
            else:
                dist.recv(expected, 0)
            errors.append("")
        except RuntimeError as error:
            errors.append(str(error))
    after = None
    if rank == 0:
        dist.send(torch.full((3,), 5.0, device=device), 1)
    else:
        after = torch.empty(3, device=device)
        dist.recv(after, 0)
        after = after.cpu()
    return errors[0], errors[1], after


def test_mismatched_dtype_or_size_raises_on_both_ranks(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", "xla")
    (send_dtype, send_size, _), (recv_dtype, recv_size, after) = run_threaded(
        mismatched, 2, timeout=60
    )
    assert "rank 1 receives into a Long tensor of 6 elements" in send_dtype, send_dtype
    assert "this rank sends a Float tensor of 6 elements" in send_dtype
    assert "rank 0 sent a Float tensor of 6 elements" in recv_dtype, recv_dtype
    assert "this rank receives into a Long tensor of 6 elements" in recv_dtype
    assert "receives into a Float tensor of 5 elements" in send_size, send_size
    assert "this rank receives into a Float tensor of 5 elements" in recv_size, recv_size
    assert torch.equal(after, torch.full((3,), 5.0))


def test_cpu_tensors_still_go_through_gloo(monkeypatch):
    def cpu_pair(rank):
        if rank == 0:
            dist.send(torch.arange(4.0), 1)
            return None
        out = torch.empty(4)
        dist.recv(out, 0)
        return out

    results, counts = run_on(monkeypatch, "xla", cpu_pair, 2)
    assert torch.equal(results[1], torch.arange(4.0))
    assert counts == (0, 0)
