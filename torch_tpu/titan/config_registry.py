"""TorchTitan recipes for TPU pods: Llama 3 and Qwen3 sized to a pod's chips.

Each function is a TorchTitan config (``Trainer.Config``), so on a pod it runs as

    torchrun ... -m torchtitan.train --module torch_tpu.titan --config llama3_8b_v5p_128

and ``python -m torch_tpu.titan.dry_run`` checks, without a pod, that it fits the chips.
Each recipe starts from TorchTitan's own settings for the model (optimizer, schedule,
sequence length, checkpointing) and sets what the pod decides: the mesh (FSDP x TP x EP;
pipeline parallelism is not needed at these sizes on these chips), the micro-batch,
full activation checkpointing and ``torch.compile``. Float8 training (TorchTitan's 405B
default) needs CUDA, so the 405B recipe trains in bf16. ``spmd_backend`` is
``partial_dtensor`` because FSDP2 in torch 2.13 cannot shard TorchTitan's default
``spmd_types`` parameters (see docs/torchtitan.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataLoader
from torchtitan.models import llama3, qwen3
from torchtitan.models.common.config_utils import decoder_vocab_size
from torchtitan.trainer import Trainer


@dataclass(frozen=True)
class Pod:
    """A TPU slice as TorchTitan sees it: one device per TensorCore that PJRT exposes."""

    name: str
    chip: str  # the device name torch.tpu.get_device_name() returns there
    devices: int
    hbm_bytes: int  # per device
    note: str


PODS = {
    "v5p-128": Pod("v5p-128", "TPU v5p", 64, 95 * 10**9, "64 chips; v5p-N counts TensorCores"),
    "v6e-256": Pod("v6e-256", "TPU v6e", 256, 32 * 10**9, "256 chips, one TensorCore each"),
    "v7-512": Pod(
        "v7-512", "TPU v7", 512, 96 * 10**9, "256 Ironwood chips of 192 GB, two devices each"
    ),
}


def _recipe(
    model_spec,
    *,
    lr: float,
    seq_len: int,
    local_batch_size: int,
    dp_shard: int,
    tp: int = 1,
    ep: int = 1,
) -> Trainer.Config:
    return Trainer.Config(
        loss=ChunkedLossWrapper.Config(
            loss_fn=CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec))
        ),
        hf_assets_path=f"./assets/hf/{model_spec.name}-{model_spec.flavor}",
        model_spec=model_spec,
        optimizer=default_adamw(lr=lr),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=200),
        # CUDA graphs are a CUDA feature; XLA compiles the whole step anyway.
        training=TrainingConfig(
            local_batch_size=local_batch_size,
            seq_len=seq_len,
            steps=1000,
            disable_cuda_graphs=True,
        ),
        dataloader=HuggingFaceTextDataLoader.Config(dataset="c4"),
        parallelism=ParallelismConfig(
            data_parallel_shard_degree=dp_shard,
            tensor_parallel_degree=tp,
            expert_parallel_degree=ep,
            spmd_backend="partial_dtensor",
        ),
        compile=CompileConfig(enable=True),
        checkpoint=CheckpointManager.Config(interval=500),
        activation_checkpoint=FullAC.Config(),
    )


# The pod each recipe is sized for (the dry run reads it).
RECIPE_PODS: dict[str, str] = {}


def _for_pod(pod: str):
    def register(function):
        RECIPE_PODS[function.__name__] = pod
        return function

    return register


@_for_pod("v5p-128")
def llama3_8b_v5p_128() -> Trainer.Config:
    spec = llama3.model_registry("8B")
    return _recipe(spec, lr=3e-4, seq_len=8192, local_batch_size=1, dp_shard=64)


@_for_pod("v6e-256")
def llama3_70b_v6e_256() -> Trainer.Config:
    spec = llama3.model_registry("70B")
    return _recipe(spec, lr=1.5e-4, seq_len=8192, local_batch_size=2, dp_shard=32, tp=8)


@_for_pod("v7-512")
def llama3_405b_v7_512() -> Trainer.Config:
    spec = llama3.model_registry("405B")
    return _recipe(spec, lr=8e-5, seq_len=8192, local_batch_size=1, dp_shard=64, tp=8)


@_for_pod("v5p-128")
def qwen3_8b_v5p_128() -> Trainer.Config:
    spec = qwen3.model_registry("8B")
    return _recipe(spec, lr=3e-4, seq_len=4096, local_batch_size=4, dp_shard=64)


@_for_pod("v6e-256")
def qwen3_32b_v6e_256() -> Trainer.Config:
    spec = qwen3.model_registry("32B")
    return _recipe(spec, lr=8e-4, seq_len=4096, local_batch_size=2, dp_shard=64, tp=4)


@_for_pod("v7-512")
def qwen3_235b_a22b_v7_512() -> Trainer.Config:
    spec = qwen3.model_registry("235B-A22B")
    return _recipe(spec, lr=3e-4, seq_len=4096, local_batch_size=2, dp_shard=128, tp=4, ep=8)
