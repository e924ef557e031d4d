"""torch.distributed.checkpoint with FSDP2 on tpu: a sharded state dict saved by one
number of ranks loads on another (argv: save|load, directory) with equal values."""

import os
import sys

import torch.distributed.checkpoint as dcp
from common import assert_close, finish, init, torch
from models import batch, loss_fn, make_net, shard
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

mode, directory = sys.argv[1], sys.argv[2]
rank, world = init()
mesh = init_device_mesh("tpu", (world,))


def sharded_net(seed):
    torch.manual_seed(seed)
    net = make_net().to("tpu")
    if seed:
        for p in net.parameters():  # different values from the saved ones
            torch.nn.init.normal_(p)
    for block in net.blocks:
        fully_shard(block, mesh=mesh)
    return fully_shard(net, mesh=mesh)


def full_values(net):
    return {k: v.full_tensor().cpu() for k, v in net.state_dict().items()}


if mode == "save":
    net = sharded_net(0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = batch(0)
    loss_fn(net(shard(x, rank, world).to("tpu")), shard(y, rank, world).to("tpu")).backward()
    opt.step()
    dcp.save({"model": net.state_dict()}, checkpoint_id=os.path.join(directory, "ckpt"))
    values = full_values(net)
    if rank == 0:
        torch.save(values, os.path.join(directory, "full.pt"))
else:
    net = sharded_net(1)
    expected = torch.load(os.path.join(directory, "full.pt"))
    before = full_values(net)
    assert any(not torch.equal(before[k], expected[k]) for k in expected)
    state = {"model": net.state_dict()}
    dcp.load(state, checkpoint_id=os.path.join(directory, "ckpt"))
    net.load_state_dict(state["model"])
    local = net.embed.weight.to_local()
    assert local.device.type == "tpu" and local.shape[0] == -(-16 // world)
    for key, value in full_values(net).items():
        assert_close(value, expected[key], f"{key} after loading on {world} ranks")
finish()
