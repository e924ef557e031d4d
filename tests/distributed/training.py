"""DDP and FSDP2 training on tpu equals one process training on the whole batch.
argv: comma-separated cases (ddp, ddp_bucket_view, ddp_no_sync, ddp_unused, fsdp,
fsdp_keep, fsdp_mixed, fsdp_ckpt, hsdp), run one after the other."""

import sys

from common import assert_close, finish, init, torch
from models import batch, loss_fn, make_net, reference_params, shard
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

rank, world = init()
STEPS = 3
LR = 0.05


def train(model, steps=STEPS, no_sync=False):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        if no_sync:  # two half batches: the first accumulates locally
            half = x.shape[0] // 2
            with model.no_sync():
                loss_fn(
                    model(shard(x[:half], rank, world).to("tpu")),
                    shard(y[:half], rank, world).to("tpu"),
                ).mul(0.5).backward()
            loss_fn(
                model(shard(x[half:], rank, world).to("tpu")),
                shard(y[half:], rank, world).to("tpu"),
            ).mul(0.5).backward()
        else:
            loss_fn(
                model(shard(x, rank, world).to("tpu")), shard(y, rank, world).to("tpu")
            ).backward()
        opt.step()


def full_params(model):
    out = {}
    for name, p in model.named_parameters():
        p = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name.replace("module.", "")] = p.detach().cpu()
    return out


def check(case, model, tol=None, **kwargs):
    expected = reference_params(STEPS, LR, **kwargs)
    actual = full_params(model)
    assert set(actual) == set(expected), (sorted(actual), sorted(expected))
    for name, value in expected.items():
        assert_close(
            actual[name].float(),
            value,
            f"{case}: parameter {name}",
            **(tol or dict(rtol=1e-4, atol=1e-5)),
        )


def run(case):
    if case.startswith("ddp"):
        unused = case == "ddp_unused"
        model = make_net(unused=unused).to("tpu")
        ddp = DDP(
            model,
            gradient_as_bucket_view=case == "ddp_bucket_view",
            find_unused_parameters=unused,
            bucket_cap_mb=0.001,
        )  # several buckets
        train(ddp, no_sync=case == "ddp_no_sync")
        check(case, model, unused=unused)
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if case == "hsdp":
            mesh = init_device_mesh("tpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("tpu", (world,))
        assert mesh.device_type == "tpu"
        ckpt = case == "fsdp_ckpt"
        model = make_net(checkpointed=ckpt).to("tpu")
        kwargs = dict(mesh=mesh, reshard_after_forward=case != "fsdp_keep")
        tol = None
        if case == "fsdp_mixed":
            kwargs["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            )
            tol = dict(rtol=2e-2, atol=2e-2)  # bfloat16 compute against a float32 reference
        for block in model.blocks:
            fully_shard(block, **kwargs)
        fully_shard(model, **kwargs)
        local = model.embed.weight.to_local()
        shards = mesh.size(-1) if case == "hsdp" else world
        assert local.shape[0] == -(-model.embed.weight.shape[0] // shards), local.shape
        assert local.device.type == "tpu"
        train(model)
        check(case, model, tol, checkpointed=ckpt)


for case in sys.argv[1].split(","):
    run(case)
finish()
