"""The vLLM worker for one tpu device: device and process group set-up, memory, warm-up.

Built on vLLM's GPU worker, as vLLM's own CPU and XPU workers are; what differs is how the
device is opened, how free memory is measured (torch.tpu's allocator statistics), and that
warm-up compiles the padding buckets instead of capturing CUDA graphs.
"""

from __future__ import annotations

import contextlib
import os

import torch
from vllm.config import set_current_vllm_config
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.mem_utils import format_gib
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.worker_base import CompilationTimes

from torch_tpu.serving.model_runner import TpuModelRunner

logger = init_logger(f"vllm.{__name__}")


class TpuWorker(Worker):
    def init_device(self) -> None:
        # --enforce-eager runs the model op by op: defer_and_fuse turns each step's ops into
        # a few fused programs (one per bucket after warm-up). TORCH_TPU_EAGER_MODE wins.
        if self.model_config.enforce_eager and "TORCH_TPU_EAGER_MODE" not in os.environ:
            torch.tpu.eager_mode = "defer_and_fuse"
        self.device = torch.device("tpu", self.local_rank)
        torch.tpu.set_device(self.device)
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(
            self.vllm_config,
            self.rank,
            self.distributed_init_method,
            self.local_rank,
            current_platform.dist_backend,
        )
        set_random_seed(self.model_config.seed)
        self._init_workspace_and_model_runner()

    def _maybe_get_memory_pool_context(self, tag: str) -> contextlib.AbstractContextManager:
        # vLLM's sleep-mode memory pools are CUDA's (cumem); tpu memory is PJRT's.
        return contextlib.nullcontext()

    def _make_model_runner(self) -> TpuModelRunner:
        return TpuModelRunner(self.vllm_config, self.device)

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: the share of device memory vLLM may use
        (--gpu-memory-utilization) less the peak a largest-batch forward pass reaches."""
        torch.tpu.reset_peak_memory_stats(self.device)
        with set_current_vllm_config(self.vllm_config):
            self.model_runner.profile_run()
        explicit = self.cache_config.kv_cache_memory_bytes
        if explicit:
            return explicit
        total = torch.tpu.mem_get_info(self.device)[1]
        peak = torch.tpu.max_memory_allocated(self.device)
        requested = int(total * self.cache_config.gpu_memory_utilization)
        available = requested - peak
        if available <= 0:
            raise ValueError(
                f"No device memory is left for the KV cache: the model's forward pass peaks "
                f"at {format_gib(peak)} GiB of the {format_gib(requested)} GiB that "
                f"--gpu-memory-utilization={self.cache_config.gpu_memory_utilization} allows "
                f"on a {format_gib(total)} GiB device. Raise it, or lower "
                "--max-num-batched-tokens."
            )
        logger.info(
            "KV cache: %s GiB (%s GiB allowed, %s GiB peak in the profile run).",
            format_gib(available),
            format_gib(requested),
            format_gib(peak),
        )
        return available

    def compile_or_warm_up_model(self) -> CompilationTimes:
        self.model_runner.warm_up_buckets()
        set_random_seed(self.model_config.seed)
        return CompilationTimes(
            language_model=self.compilation_config.compilation_time,
            encoder=self.compilation_config.encoder_compilation_time,
        )

    def sleep(self, level: int = 1) -> None:
        logger.warning("Sleep mode is not supported on tpu; ignoring it.")

    def wake_up(self, tags: list[str] | None = None) -> None:
        logger.warning("Sleep mode is not supported on tpu; ignoring it.")
