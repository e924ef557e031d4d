"""Functional collectives inside torch.compile(backend="tpu") graphs give the eager
results (with the host-staging engine a traced collective runs as its own step)."""

import torch.distributed._functional_collectives as funcol
from common import assert_close, dist, finish, init, torch

rank, world = init()


def step(x, w):
    h = (x @ w).relu()
    h = funcol.all_reduce(h, "sum", dist.group.WORLD)
    g = funcol.all_gather_tensor(h * 2, 0, dist.group.WORLD)
    return g.sum(0) + 1


torch.manual_seed(0)
w = torch.randn(4, 4)
xs = [torch.randn(3, 4) + r for r in range(world)]
expected = None
for r in range(world):
    h = (xs[r] @ w).relu()
    expected = h if expected is None else expected + h
expected = (torch.cat([expected * 2] * world)).sum(0) + 1
eager = step(xs[rank].to("tpu"), w.to("tpu"))
assert_close(eager, expected, "eager", rtol=1e-5, atol=1e-5)
compiled = torch.compile(step, backend="tpu")
for _ in range(2):
    out = compiled(xs[rank].to("tpu"), w.to("tpu"))
    assert_close(out, expected, "compiled", rtol=1e-5, atol=1e-5)
finish()
