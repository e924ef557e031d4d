"""DTensor and tensor parallelism on tpu equal the single-device result: placements,
redistribute, DTensor ops, random DTensors, and a Llama-style block parallelized with
ColwiseParallel / RowwiseParallel / SequenceParallel (forward and gradients)."""

import torch.nn.functional as F
from common import assert_close, dist, finish, init, torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

rank, world = init()
mesh = init_device_mesh("tpu", (world,))
torch.manual_seed(0)
a = torch.randn(8, 6)
b = torch.randn(6, 4)

# placements and redistribute
da = distribute_tensor(a.to("tpu"), mesh, [Shard(0)])
assert da.to_local().device.type == "tpu" and da.to_local().shape == (8 // world, 6)
assert_close(da.full_tensor(), a, "Shard(0) full_tensor")
assert_close(da.redistribute(mesh, [Replicate()]).to_local(), a, "Shard(0) -> Replicate")
assert_close(da.redistribute(mesh, [Shard(1)]).full_tensor(), a, "Shard(0) -> Shard(1)")
partial = DTensor.from_local(torch.full((3,), float(rank + 1), device="tpu"), mesh, [Partial()])
assert_close(
    partial.full_tensor(), torch.full((3,), float(sum(range(1, world + 1)))), "Partial -> full"
)
assert_close(
    partial.redistribute(mesh, [Shard(0)]).full_tensor(),
    torch.full((3,), float(sum(range(1, world + 1)))),
    "Partial -> Shard(0)",
)

# DTensor ops: matmul, elementwise, reductions
db = distribute_tensor(b.to("tpu"), mesh, [Replicate()])
assert_close((da @ db).full_tensor(), a @ b, "Shard(0) @ Replicate", rtol=1e-5, atol=1e-5)
assert_close((da.relu() * 2 + 1).full_tensor(), a.relu() * 2 + 1, "elementwise")
assert_close(da.sum().full_tensor(), a.sum(), "sum", rtol=1e-5, atol=1e-5)
assert_close(da.mean(dim=0).full_tensor(), a.mean(dim=0), "mean(dim=0)", rtol=1e-5, atol=1e-6)
dc = distribute_tensor(a.t().contiguous().to("tpu"), mesh, [Shard(1)])
assert_close((dc @ da).full_tensor(), a.t() @ a, "Shard(1) @ Shard(0)", rtol=1e-4, atol=1e-4)

# random DTensors: the same global tensor on every rank, different numbers per shard
torch.manual_seed(7)
r1 = torch.distributed.tensor.randn(8, 4, device_mesh=mesh, placements=[Shard(0)])
full = r1.full_tensor().cpu()
gathered = [torch.empty_like(full) for _ in range(world)]
dist.all_gather_object(gathered, full)
for g in gathered:
    assert torch.equal(g, full), "randn on a mesh differs across ranks"
assert not torch.equal(full[:2], full[2:4]), "shards drew the same numbers"
torch.manual_seed(7)
r2 = torch.distributed.tensor.randn(8, 4, device_mesh=mesh, placements=[Shard(0)])
assert torch.equal(r2.full_tensor().cpu(), full), "randn on a mesh is not reproducible"


# a Llama-style block with tensor + sequence parallelism
class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (
            w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv)
        )
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim=16, heads=4, hidden=32):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


torch.manual_seed(1)
reference = TransformerBlock()
x = torch.randn(2, 4 * world, 16)
ref_out = reference(x)
ref_out.pow(2).sum().backward()

torch.manual_seed(1)
block = TransformerBlock().to("tpu")
sequence_in = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
parallelize_module(
    block,
    mesh,
    {
        "attention_norm": SequenceParallel(),
        "attention": sequence_in,
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": sequence_in,
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    },
)
assert block.attention.wq.weight.to_local().shape == (16 // world, 16)
per = x.shape[1] // world
local_x = x[:, rank * per : (rank + 1) * per].to("tpu")
out = block(local_x)  # the sequence shard, as the layer before hands it over
out = out.to_local() if isinstance(out, DTensor) else out
assert_close(
    out,
    ref_out[:, rank * per : (rank + 1) * per].detach(),
    "TP block forward",
    rtol=1e-4,
    atol=1e-5,
)
out.pow(2).sum().backward()
for name, p in reference.named_parameters():
    grad = dict(block.named_parameters())[name].grad
    grad = grad.full_tensor() if isinstance(grad, DTensor) else grad
    assert_close(grad, p.grad, f"TP gradient of {name}", rtol=1e-4, atol=1e-4)
finish()
