"""Checks that a TorchTitan pod recipe fits its chips, on any machine, in seconds.

    python -m torch_tpu.titan.dry_run                 # every recipe
    python -m torch_tpu.titan.dry_run llama3_8b_v5p_128 qwen3_32b_v6e_256

For each recipe of ``torch_tpu.titan.config_registry`` this builds the model on the meta
device (no memory), starts a fake process group of the pod's size, lets TorchTitan's own
``parallelize_fn`` apply the recipe's mesh (FSDP, TP, EP) and reads each parameter's
local shard as rank 0 would hold it. From that it prints per-device memory against the
chip's HBM and TorchTitan's FLOPs per token:

- parameters (float32), gradients (float32) and AdamW's two moments (float32): 16 bytes
  per local parameter element;
- FSDP's working set: the bf16 parameters of the transformer block being computed and of
  the one prefetched, and that block's float32 gradients before their reduce-scatter
  (the embedding or output layer instead, if larger);
- activations, estimated per token from the model's own dimensions, in bf16: what one
  block saves for backward (the residual and normalized inputs, the q/k/v projections,
  the attention output, the MLP's or the routed experts' intermediates), divided by the
  TP degree (sequence parallelism shards the rest). With full activation checkpointing
  each block keeps only its input, and one block is recomputed at a time (counted twice:
  its activations and their gradients). The logits count once in bf16 and once in
  float32.
- attention scores: FlexAttention on tpu takes its dense path today, which holds the
  whole float32 score matrix of the block being computed (batch x heads/TP x seq x seq),
  counted three times (scores, probabilities, their gradient). A fused attention kernel
  would remove this term.

XLA plans memory itself, so the real figure differs; the estimate is meant to say which
recipes fit with room to spare and which are near the edge.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

import torch

_BF16, _FP32 = 2, 4


@dataclasses.dataclass
class Report:
    recipe: str
    pod: str
    chip: str
    devices: int
    mesh: str
    parameters: int
    flops_per_token: float
    state_bytes: int
    fsdp_working_bytes: int
    activation_bytes: int
    hbm_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.fsdp_working_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.hbm_bytes


def _local_numel(parameter: torch.Tensor) -> int:
    from torch.distributed.tensor import DTensor

    return (parameter.to_local() if isinstance(parameter, DTensor) else parameter).numel()


def _layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    layers = model.layers
    return list(layers.values()) if hasattr(layers, "values") else list(layers)


def _shape(module: torch.nn.Module, suffix: str) -> tuple[int, ...] | None:
    for name, parameter in module.named_parameters():
        if name.endswith(suffix):
            return tuple(parameter.shape)
    return None


def _top_k(module: torch.nn.Module) -> int:
    for sub in module.modules():
        if hasattr(sub, "top_k"):
            return int(sub.top_k)
    return 1


def activation_bytes_per_token(layer: torch.nn.Module, dim: int) -> int:
    """What one transformer block saves for backward per token, in bf16 (see module doc)."""
    qkv = _shape(layer, "wqkv.weight")
    q, kv = (
        (qkv[0], 0) if qkv else (_shape(layer, "wq.weight")[0], 2 * _shape(layer, "wk.weight")[0])
    )
    attention_out = _shape(layer, "wo.weight")[1]
    saved = 4 * dim + q + kv + attention_out
    dense = _shape(layer, "w1.weight")
    if dense is not None:
        saved += 4 * dense[0]
    experts = _shape(layer, "w1_EFD")
    if experts is not None:
        top_k = _top_k(layer)
        saved += top_k * (dim + 4 * experts[1]) + experts[0] * _FP32 // _BF16
    return saved * _BF16


def _heads(layer: torch.nn.Module) -> int:
    return int(layer.attention.n_heads)


def _block_numel(model: torch.nn.Module) -> tuple[int, int]:
    """The largest FSDP unit's parameters, full and as this rank's TP/EP shard."""
    best = (0, 0)
    units = _layers(model) + [m for m in (model.tok_embeddings, model.lm_head) if m is not None]
    for unit in units:
        full = sum(p.numel() for p in unit.parameters())
        local = sum(_unsharded_over_fsdp(p) for p in unit.parameters())
        best = max(best, (full, local), key=lambda pair: pair[1])
    return best


def _unsharded_over_fsdp(parameter: torch.Tensor) -> int:
    """Elements of a parameter after FSDP's all-gather: only TP/EP shards remain."""
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(parameter, DTensor):
        return parameter.numel()
    numel = parameter.numel()
    for mesh_name, placement in zip(
        parameter.device_mesh.mesh_dim_names or (), parameter.placements
    ):
        if isinstance(placement, Shard) and mesh_name in ("tp", "ep"):
            numel //= parameter.device_mesh.size(
                parameter.device_mesh.mesh_dim_names.index(mesh_name)
            )
    return numel


def dry_run(name: str) -> Report:
    """Applies recipe ``name``'s parallelism to its model on a fake pod (rank 0)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torchtitan.config import TORCH_DTYPE_MAP
    from torchtitan.distributed.activation_checkpoint import FullAC
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.tools import utils

    from torch_tpu.titan import config_registry

    if name not in config_registry.RECIPE_PODS:
        raise ValueError(f"no recipe {name!r}; there are {sorted(config_registry.RECIPE_PODS)}")
    pod = config_registry.PODS[config_registry.RECIPE_PODS[name]]
    config = getattr(config_registry, name)()
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=pod.devices, store=FakeStore())
    try:
        parallel_dims = ParallelDims.from_config(config.parallelism, pod.devices)
        model_config = config.model_spec.model
        model_config.update_from_config(config=config)
        with torch.device("meta"), utils.set_default_dtype(TORCH_DTYPE_MAP[config.training.dtype]):
            model = model_config.build()
        parameters, flops = model_config.get_nparams_and_flops(model, config.training.seq_len)
        dim = model.tok_embeddings.weight.shape[1]
        vocab = model.tok_embeddings.weight.shape[0]
        per_token = activation_bytes_per_token(_layers(model)[0], dim)
        heads = _heads(_layers(model)[0])
        model = config.model_spec.parallelize_fn(
            model,
            parallel_dims=parallel_dims,
            training=config.training,
            parallelism=config.parallelism,
            compile_config=config.compile,
            ac_config=config.activation_checkpoint,
            dump_folder="/tmp",
        )
        local = sum(_local_numel(p) for p in model.parameters())
        _, block_local = _block_numel(model)
        n_layers = len(_layers(model))
    finally:
        dist.destroy_process_group()

    tp = parallel_dims.tp
    tokens = config.training.local_batch_size * config.training.seq_len
    if isinstance(config.activation_checkpoint, FullAC.Config):
        activations = n_layers * tokens * dim * _BF16 // tp + 2 * tokens * per_token // tp
    else:  # no or selective checkpointing, counted as none: an upper bound
        activations = n_layers * tokens * per_token // tp
    activations += tokens * vocab * (_BF16 + _FP32) // tp
    seq = config.training.seq_len
    activations += 3 * config.training.local_batch_size * (heads // tp) * seq * seq * _FP32
    mesh = " x ".join(
        f"{axis} {degree}"
        for axis, degree in (
            ("dp_shard", parallel_dims.dp_shard),
            ("tp", parallel_dims.tp),
            ("pp", parallel_dims.pp),
            ("ep", parallel_dims.ep),
        )
        if degree > 1 or axis == "dp_shard"
    )
    return Report(
        recipe=name,
        pod=pod.name,
        chip=pod.chip,
        devices=pod.devices,
        mesh=mesh,
        parameters=parameters,
        flops_per_token=float(flops),
        state_bytes=16 * local,
        fsdp_working_bytes=block_local * (2 * _BF16 + _FP32),
        activation_bytes=activations,
        hbm_bytes=pod.hbm_bytes,
    )


def _gb(value: int) -> str:
    return f"{value / 1e9:.1f}"


def format_table(reports: list[Report]) -> str:
    from torch_tpu._runtime.peak_flops import TPU_PEAK_FLOPS

    header = (
        "| recipe | pod (devices) | mesh | params | GFLOP/token | state GB | FSDP GB | "
        "activations GB | total / HBM GB | fits | tokens/s/device at 50% MFU |"
    )
    rows = [header, "|" + "---|" * 11]
    for r in reports:
        rate = 0.5 * TPU_PEAK_FLOPS[r.chip] / r.flops_per_token
        rows.append(
            f"| {r.recipe} | {r.pod} ({r.devices}) | {r.mesh} | {r.parameters / 1e9:.1f}B | "
            f"{r.flops_per_token / 1e9:.0f} | {_gb(r.state_bytes)} | "
            f"{_gb(r.fsdp_working_bytes)} | {_gb(r.activation_bytes)} | "
            f"{_gb(r.total_bytes)} / {_gb(r.hbm_bytes)} | {'yes' if r.fits else 'NO'} | "
            f"{rate:,.0f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from torch_tpu.titan import config_registry

    parser = argparse.ArgumentParser(description="Dry runs of torch_tpu's TorchTitan pod recipes")
    parser.add_argument(
        "recipes", nargs="*", help=f"default: all of {list(config_registry.RECIPE_PODS)}"
    )
    args = parser.parse_args(argv)
    reports: list[Any] = [dry_run(name) for name in args.recipes or config_registry.RECIPE_PODS]
    print(format_table(reports))
    return 0 if all(r.fits for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
