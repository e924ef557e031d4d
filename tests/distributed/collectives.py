"""Every c10d collective on tpu tensors, every dtype, contiguous or not, checked on each
rank against the same reduction computed with torch on the CPU from every rank's input.
argv: backend name or "default" (init_process_group() with no backend)."""

import os
import sys

import torch.distributed._functional_collectives as funcol  # noqa: E402
from common import assert_close, dist, finish, init, torch

backend = None if sys.argv[1] == "default" else sys.argv[1]
rank, world = init(backend)
assert torch.tpu.current_device() == rank, "each rank uses its own device"
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))  # the CUDA idiom works too
assert torch.tpu.current_device() == rank
if backend is None:
    assert dist.get_default_backend_for_device("tpu") == "tpu_dist"
scratch = torch.ones(2, device="tpu")
scratch.record_stream(torch.tpu.current_stream())  # FSDP and DDP code calls it
assert torch.device("tpu").index is None and torch.empty(1, device="tpu").device.index == rank

R = dist.ReduceOp
DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


def value(r, dtype, shape=(2, 3)):
    """Rank r's input: small values, exact in every dtype."""
    n = int(torch.tensor(shape).prod())
    base = (torch.arange(n) * 3 + r * 5) % 7
    if dtype == torch.bool:
        return (base % 2 == 0).reshape(shape)
    if dtype.is_complex:
        return torch.complex(base.float(), (base % 3).float()).to(dtype).reshape(shape)
    return (base + 1).to(dtype).reshape(shape)


def ops_for(dtype):
    if dtype == torch.bool:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype.is_complex:
        return [R.SUM, R.AVG]
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype.is_floating_point:
        ops.append(R.AVG)
    else:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def reference(op, dtype, shape=(2, 3)):
    xs = [value(r, dtype, shape) for r in range(world)]
    if dtype == torch.bool:
        stack = torch.stack(xs)
        if op in (R.SUM, R.MAX, R.BOR):
            return stack.any(0)
        if op in (R.PRODUCT, R.MIN, R.BAND):
            return stack.all(0)
        return (stack.to(torch.int64).sum(0) % 2).bool()
    wide = (
        torch.complex128
        if dtype.is_complex
        else (torch.float64 if dtype.is_floating_point else torch.int64)
    )
    stack = torch.stack([x.to(wide) for x in xs])
    if op == R.SUM:
        out = stack.sum(0)
    elif op == R.AVG:
        out = stack.sum(0) / world
    elif op == R.PRODUCT:
        out = stack.prod(0)
    elif op == R.MIN:
        out = stack.min(0).values
    elif op == R.MAX:
        out = stack.max(0).values
    else:
        out = xs[0].clone()
        for x in xs[1:]:
            out = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[
                op
            ](out, x)
    return out.to(dtype)


# all_reduce: every dtype x every reduction it has
for dtype in DTYPES:
    for op in ops_for(dtype):
        t = value(rank, dtype).to("tpu")
        dist.all_reduce(t, op=op)
        assert t.device.type == "tpu"
        assert_close(t, reference(op, dtype), f"all_reduce {op} {dtype}")

# all_reduce through non-contiguous views writes through to the base
base = torch.zeros(5, 6, device="tpu")
view = base.t()[1:4]  # 3 x 5, strided, offset
view.copy_(value(rank, torch.float32, (3, 5)))
dist.all_reduce(view, op=R.MAX)
expected = torch.zeros(5, 6)
expected.t()[1:4] = reference(R.MAX, torch.float32, (3, 5))
assert_close(base, expected, "all_reduce MAX of x.t()[1:4]")

# broadcast, every dtype, into a view on non-roots
for dtype in DTYPES:
    t = value(rank, dtype).to("tpu")
    dist.broadcast(t, src=world - 1)
    assert_close(t, value(world - 1, dtype), f"broadcast {dtype}")
holder = torch.zeros(4, 3, device="tpu")
dist.broadcast(holder[1:3], src=0) if rank == 0 else None
if rank != 0:
    dist.broadcast(holder[1:3], src=0)
assert_close(holder, torch.zeros(4, 3), "broadcast into a view")

# reduce to a root
for op in (R.SUM, R.MAX):
    t = value(rank, torch.float32).to("tpu")
    dist.reduce(t, dst=1 % world, op=op)
    if rank == 1 % world:
        assert_close(t, reference(op, torch.float32), f"reduce {op}")

# all_gather (list, into views) and all_gather_into_tensor, every dtype
for dtype in DTYPES:
    outs = [torch.empty(2, 3, dtype=dtype, device="tpu") for _ in range(world)]
    dist.all_gather(outs, value(rank, dtype).to("tpu"))
    for r in range(world):
        assert_close(outs[r], value(r, dtype), f"all_gather {dtype} block {r}")
    flat = torch.empty(world * 2, 3, dtype=dtype, device="tpu")
    dist.all_gather_into_tensor(flat, value(rank, dtype).to("tpu"))
    assert_close(flat, torch.cat([value(r, dtype) for r in range(world)]), f"ag_into {dtype}")
wide = torch.zeros(3, 2 * world + 1, device="tpu")
views = [wide[:, 2 * r : 2 * r + 2] for r in range(world)]
dist.all_gather(views, value(rank, torch.float32, (3, 2)).to("tpu"))
expected = torch.zeros(3, 2 * world + 1)
for r in range(world):
    expected[:, 2 * r : 2 * r + 2] = value(r, torch.float32, (3, 2))
assert_close(wide, expected, "all_gather into column views")

# reduce_scatter (list) and reduce_scatter_tensor, SUM and AVG


def rs_input(r, dtype):
    return torch.cat([value(r * world + j, dtype) for j in range(world)])


for dtype in (torch.float32, torch.bfloat16, torch.int32, torch.int16, torch.float64):
    for op in (R.SUM, R.MAX) + ((R.AVG,) if dtype.is_floating_point else ()):
        out = torch.empty(2, 3, dtype=dtype, device="tpu")
        dist.reduce_scatter_tensor(out, rs_input(rank, dtype).to("tpu"), op=op)
        wide_t = torch.float64 if dtype.is_floating_point else torch.int64
        stack = torch.stack([rs_input(r, dtype).to(wide_t) for r in range(world)])
        red = {R.SUM: stack.sum(0), R.MAX: stack.max(0).values, R.AVG: stack.sum(0) / world}[op]
        assert_close(
            out, red.to(dtype)[2 * rank : 2 * rank + 2], f"reduce_scatter_tensor {op} {dtype}"
        )
out = torch.zeros(4, 3, device="tpu")
chunks = [value(rank * world + j, torch.float32).to("tpu") for j in range(world)]
dist.reduce_scatter(out[1:3], chunks)
expected = torch.zeros(4, 3)
expected[1:3] = sum(value(r * world + rank, torch.float32) for r in range(world))
assert_close(out, expected, "reduce_scatter into a view")

# all_to_all (list) and all_to_all_single, even and uneven splits
ins = [value(rank * 10 + j, torch.float32).to("tpu") for j in range(world)]
outs = [torch.empty(2, 3, device="tpu") for _ in range(world)]
dist.all_to_all(outs, ins)
for j in range(world):
    assert_close(outs[j], value(j * 10 + rank, torch.float32), f"all_to_all from {j}")
single_in = torch.arange(world * 2 * 3, dtype=torch.float32).reshape(world * 2, 3) + 100 * rank
single_out = torch.empty(world * 2, 3, device="tpu")
dist.all_to_all_single(single_out, single_in.to("tpu"))
expected = torch.cat(
    [
        (torch.arange(world * 6, dtype=torch.float32).reshape(world * 2, 3) + 100 * j)[
            2 * rank : 2 * rank + 2
        ]
        for j in range(world)
    ]
)
assert_close(single_out, expected, "all_to_all_single even")


def sends(src, dst):  # rows rank src sends to rank dst
    return (src + 2 * dst) % 3 + 1


in_splits = [sends(rank, j) for j in range(world)]
out_splits = [sends(j, rank) for j in range(world)]
uneven_in = torch.cat(
    [
        torch.full((sends(rank, j), 2), float(rank * 10 + j), dtype=torch.float64)
        for j in range(world)
    ]
)
uneven_out = torch.empty(sum(out_splits), 2, dtype=torch.float64, device="tpu")
dist.all_to_all_single(uneven_out, uneven_in.to("tpu"), out_splits, in_splits)
expected = torch.cat(
    [
        torch.full((sends(j, rank), 2), float(j * 10 + rank), dtype=torch.float64)
        for j in range(world)
    ]
)
assert_close(uneven_out, expected, "all_to_all_single uneven")

# gather and scatter
root = world - 1
gathered = [torch.empty(2, 3, device="tpu") for _ in range(world)] if rank == root else None
dist.gather(value(rank, torch.float32).to("tpu"), gathered, dst=root)
if rank == root:
    for r in range(world):
        assert_close(gathered[r], value(r, torch.float32), f"gather block {r}")
received = torch.empty(2, 3, dtype=torch.int64, device="tpu")
pieces = [value(r + 20, torch.int64).to("tpu") for r in range(world)] if rank == 0 else None
dist.scatter(received, pieces, src=0)
assert_close(received, value(rank + 20, torch.int64), "scatter")

# async_op: Work.wait / is_completed / get_future
t = value(rank, torch.float32).to("tpu")
work = dist.all_reduce(t, async_op=True)
work.wait()
assert work.is_completed()
future_value = work.get_future().wait()
assert_close(future_value[0], reference(R.SUM, torch.float32), "future's value")
assert_close(t, reference(R.SUM, torch.float32), "async all_reduce")

# send/recv, isend/irecv, batch_isend_irecv ring (sends never block)
nxt, prv = (rank + 1) % world, (rank - 1) % world
buf = torch.zeros(2, 3, dtype=torch.bfloat16, device="tpu")
recv_work = dist.irecv(buf, src=prv)
send_work = dist.isend(value(rank, torch.bfloat16).to("tpu"), dst=nxt)
recv_work.wait()
send_work.wait()
assert_close(buf, value(prv, torch.bfloat16), "isend/irecv")
if world == 2:
    if rank == 0:
        dist.send(torch.full((3,), 7.0, device="tpu"), dst=1)
        back = torch.zeros(2, 2, device="tpu")
        dist.recv(back.t(), src=1)
        assert_close(back, torch.tensor([[1.0, 3.0], [2.0, 4.0]]), "recv into a transposed view")
    else:
        got = torch.zeros(3, device="tpu")
        dist.recv(got, src=0)
        assert_close(got, torch.full((3,), 7.0), "send/recv")
        dist.send(torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="tpu"), dst=0)
ring_in = torch.zeros(4, device="tpu")
ops = [
    dist.P2POp(dist.isend, torch.full((4,), float(rank), device="tpu"), nxt),
    dist.P2POp(dist.irecv, ring_in, prv),
]
for w in dist.batch_isend_irecv(ops):
    w.wait()
assert_close(ring_in, torch.full((4,), float(prv)), "batch_isend_irecv ring")

# functional collectives (what torch.compile and DTensor use), and the raw ops
x = value(rank, torch.float32).to("tpu")
assert_close(
    funcol.all_reduce(x, "sum", dist.group.WORLD),
    reference(R.SUM, torch.float32),
    "funcol.all_reduce",
)
assert_close(
    funcol.all_gather_tensor(x, 0, dist.group.WORLD),
    torch.cat([value(r, torch.float32) for r in range(world)]),
    "funcol.all_gather",
)
rs = funcol.reduce_scatter_tensor(
    rs_input(rank, torch.float32).to("tpu"), "sum", 0, dist.group.WORLD
)
stack = torch.stack([rs_input(r, torch.float32) for r in range(world)]).sum(0)
assert_close(rs, stack[2 * rank : 2 * rank + 2], "funcol.reduce_scatter_tensor")
a2a = funcol.all_to_all_single(single_in.to("tpu"), None, None, dist.group.WORLD)
assert_close(
    a2a,
    torch.cat(
        [
            (torch.arange(world * 6, dtype=torch.float32).reshape(world * 2, 3) + 100 * j)[
                2 * rank : 2 * rank + 2
            ]
            for j in range(world)
        ]
    ),
    "funcol.all_to_all_single",
)
group_name = dist.group.WORLD.group_name
raw = torch.ops._c10d_functional.all_reduce(x, "max", group_name)
raw = torch.ops._c10d_functional.wait_tensor(raw)
assert_close(raw, reference(R.MAX, torch.float32), "_c10d_functional.all_reduce + wait_tensor")
coalesced = torch.ops._c10d_functional.all_gather_into_tensor_coalesced(
    [x, x * 2], world, group_name
)
for i, c in enumerate(coalesced):
    torch.ops._c10d_functional.wait_tensor(c)
    assert_close(
        c,
        torch.cat([value(r, torch.float32) * (i + 1) for r in range(world)]),
        "all_gather_into_tensor_coalesced",
    )

# object collectives, and cpu tensors through the same group
objects = [None] * world
dist.all_gather_object(objects, {"rank": rank, "tag": "x" * rank})
assert objects == [{"rank": r, "tag": "x" * r} for r in range(world)], objects
box = [rank, "hello"] if rank == 0 else [None, None]
dist.broadcast_object_list(box, src=0)
assert box == [0, "hello"], box
if backend is not None:
    c = value(rank, torch.float32)
    dist.all_reduce(c)
    assert c.device.type == "cpu"
    assert_close(c, reference(R.SUM, torch.float32), "cpu tensor all_reduce")
    cv = torch.zeros(5, 6)
    cview = cv.t()[1:4]
    cview.copy_(value(rank, torch.float32, (3, 5)))
    dist.all_reduce(cview, op=R.MAX)  # gloo alone reduces this view wrongly
    expected = torch.zeros(5, 6)
    expected.t()[1:4] = reference(R.MAX, torch.float32, (3, 5))
    assert_close(cv, expected, "cpu non-contiguous view all_reduce")

# subgroups
evens = dist.new_group([r for r in range(world) if r % 2 == 0])
if rank % 2 == 0:
    t = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(t, group=evens)
    assert_close(
        t,
        torch.full((2,), float(sum(r for r in range(world) if r % 2 == 0))),
        "subgroup all_reduce",
    )

# empty tensors, and two receives outstanding from one peer on one tag
empty = torch.empty(0, device="tpu")
dist.all_reduce(empty)
dist.broadcast(torch.empty(0, 3, device="tpu"), src=0)
assert empty.numel() == 0
first, second = torch.zeros(2, device="tpu"), torch.zeros(5, device="tpu")
works = [dist.irecv(first, src=prv), dist.irecv(second, src=prv)]
works += [
    dist.isend(torch.full((2,), 1.0 + rank, device="tpu"), dst=nxt),
    dist.isend(torch.full((5,), 10.0 + rank, device="tpu"), dst=nxt),
]
for w in works:
    w.wait()
assert_close(first, torch.full((2,), 1.0 + prv), "first of two outstanding receives")
assert_close(second, torch.full((5,), 10.0 + prv), "second of two outstanding receives")

finish()
