"""Bad input raises a clear error on every rank, and the group stays usable after it.
Each expected error is checked for its class and for words that name the problem."""

from common import assert_close, dist, finish, init, torch

rank, world = init("tpu")


def expect(error_class, words, fn):
    try:
        fn()
    except error_class as error:
        text = str(error)
        missing = [w for w in words if w not in text]
        assert not missing, f"rank {rank}: error lacks {missing}: {text}"
        return text
    raise AssertionError(f"rank {rank}: expected {error_class} naming {words}")


def still_works(what):
    t = torch.ones(3, device="tpu")
    dist.all_reduce(t)
    assert_close(t, torch.full((3,), float(world)), f"all_reduce after {what}")


# mismatched sizes across ranks: gloo alone would abort the process
expect(
    RuntimeError,
    ["mismatch", "rank 1", "elements"],
    lambda: dist.all_reduce(torch.ones(4 + 4 * rank, device="tpu")),
)
still_works("a size mismatch")

# mismatched dtypes across ranks
dtype = torch.float32 if rank == 0 else torch.float64
expect(
    RuntimeError,
    ["mismatch", "Float", "Double"],
    lambda: dist.all_reduce(torch.ones(4, dtype=dtype, device="tpu")),
)
still_works("a dtype mismatch")

# different collectives on different ranks
expect(
    RuntimeError,
    ["mismatch", "all_reduce", "broadcast"],
    lambda: (
        dist.all_reduce(torch.ones(2, device="tpu"))
        if rank == 0
        else dist.broadcast(torch.ones(2, device="tpu"), src=0)
    ),
)
still_works("a collective mismatch")

# a wrong dtype within one call
expect(
    (TypeError, ValueError),
    ["dtype"],
    lambda: dist.all_gather(
        [torch.empty(2, dtype=torch.int32, device="tpu")] * world, torch.ones(2, device="tpu")
    ),
)
# a tensor on another device within one call
expect(
    ValueError,
    ["one device", "cpu", "tpu"],
    lambda: dist.all_gather_into_tensor(torch.empty(2 * world), torch.ones(2, device="tpu")),
)
# wrong output size
expect(
    ValueError,
    ["all_gather_into_tensor", "elements"],
    lambda: dist.all_gather_into_tensor(torch.empty(3, device="tpu"), torch.ones(2, device="tpu")),
)
# bitwise reduction of floats
expect(
    ValueError,
    ["bitwise", "Float"],
    lambda: dist.all_reduce(torch.ones(2, device="tpu"), op=dist.ReduceOp.BAND),
)
# uneven all_to_all splits that do not add up
expect(
    ValueError,
    ["split sizes add up"],
    lambda: dist.all_to_all_single(
        torch.empty(4, device="tpu"), torch.ones(4, device="tpu"), [1] * world, [3] * world
    ),
)
# splits that disagree across ranks
bad_in = [2] * world if rank == 0 else [1] * world
expect(
    RuntimeError,
    ["mismatch", "all_to_all"],
    lambda: dist.all_to_all_single(
        torch.empty(2 * world, device="tpu"),
        torch.ones(sum(bad_in), device="tpu"),
        [2] * world,
        bad_in,
    ),
)
still_works("bad arguments")

# send/recv of mismatched sizes: the receiver raises, the connection survives
if rank == 0:
    dist.send(torch.ones(5, device="tpu"), dst=1)
elif rank == 1:
    expect(
        RuntimeError,
        ["recv from rank 0", "5 elements", "3 elements"],
        lambda: dist.recv(torch.empty(3, device="tpu"), src=0),
    )
if rank == 0:
    dist.send(torch.full((3,), 2.0, device="tpu"), dst=1)
elif rank == 1:
    t = torch.empty(3, device="tpu")
    dist.recv(t, src=0)
    assert_close(t, torch.full((3,), 2.0), "recv after a mismatched one")
expect(
    ValueError,
    ["peer rank", "not in the group"],
    lambda: (
        dist.send(torch.ones(1, device="tpu"), dst=world)
        if rank == 0
        else dist.recv(torch.ones(1, device="tpu"), src=world + 3)
    ),
)
still_works("p2p errors")
finish()
