"""vLLM's model runner on the tpu device.

vLLM's GPU runner keeps its step bookkeeping (persistent batch, block tables, positions, slot
mappings, sampling parameters) in device tensors and updates them with many small ops whose
sizes change every step. On a device where every new size is a new compiled program that is the
wrong trade, so this runner keeps all of it on the host, as vLLM's CPU runner does, and sends
the device only what the model needs, at bucketed sizes:

- the step's token ids and positions, padded to a token bucket (one copy each);
- the attention metadata (one copy, built by torch_tpu.serving.attention);
- the rows whose logits are wanted, padded to a request bucket; the logits come back to the
  host, where vLLM's sampler runs on them.

So the device runs one set of programs per (token bucket, context-block bucket, request
bucket), all compiled in warm-up (`warm_up_buckets`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

import torch
from vllm.logger import init_logger
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from torch_tpu.serving.buckets import bucket, buckets

logger = init_logger(f"vllm.{__name__}")

HOST = torch.device("cpu")


class _NoEvent:
    """Stands in for a CUDA event: the runner's bookkeeping is on the host, and a host read of
    a device result waits for it, so there is nothing to record or wait on."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, *args, **kwargs) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, *args, **kwargs) -> None:
        pass


class _NoStream:
    def __init__(self, *args, **kwargs) -> None:
        self.device = HOST

    def wait_stream(self, *args, **kwargs) -> None:
        pass


@contextlib.contextmanager
def _without_cuda_streams():
    """The GPU runner makes CUDA events and side streams while it is built (for overlapped
    copies); here they are placeholders."""
    saved = torch.Event, torch.cuda.Event, torch.cuda.Stream
    torch.Event, torch.cuda.Event, torch.cuda.Stream = _NoEvent, _NoEvent, _NoStream
    try:
        yield
    finally:
        torch.Event, torch.cuda.Event, torch.cuda.Stream = saved


def _to(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device) -> None:
        # Built for the host, so every bookkeeping buffer and the input batch live there;
        # then pointed at the device for the model, the KV cache and attention metadata.
        with _without_cuda_streams():
            super().__init__(vllm_config, HOST)
        self.device = device
        self.use_cuda_graph = False
        # Rows of the logits the sampler wants this step (the rest is request padding).
        self._sampled_rows: int | None = None

    def load_model(self, *args, **kwargs) -> None:
        super().load_model(*args, **kwargs)
        compute_logits = self.model.compute_logits

        def logits_on_host(hidden_states: torch.Tensor) -> torch.Tensor:
            logits = compute_logits(hidden_states).to(HOST)
            rows, self._sampled_rows = self._sampled_rows, None
            return logits if rows is None else logits[:rows]

        self.model.compute_logits = logits_on_host

        # The runner (and its dummy runs) hand the model host tensors: send them over.
        forward = self.model.forward

        def forward_on_device(*args, **kwargs):
            args = [_to(value, self.device) for value in args]
            kwargs = {name: _to(value, self.device) for name, value in kwargs.items()}
            return forward(*args, **kwargs)

        self.model.forward = forward_on_device

    def _dummy_sampler_run(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # The sampler runs on the host here: make its dummy sampling parameters there too.
        device, self.device = self.device, HOST
        try:
            return super()._dummy_sampler_run(hidden_states)
        finally:
            self.device = device

    def _sync_device(self) -> None:
        torch.tpu.synchronize(self.device)

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        return sampled_token_ids.tolist()

    def _determine_batch_execution_and_padding(self, num_tokens: int, *args, **kwargs):
        """vLLM pads a step's tokens only for CUDA graphs; here every step is padded to its
        bucket, so each bucket is one set of programs."""
        mode, descriptor, *rest = super()._determine_batch_execution_and_padding(
            num_tokens, *args, **kwargs
        )
        padded = bucket(descriptor.num_tokens, self.max_num_tokens)
        return (mode, dataclasses.replace(descriptor, num_tokens=padded), *rest)

    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens):
        logits_indices, *rest = super()._prepare_inputs(scheduler_output, num_scheduled_tokens)
        # Gather a request bucket of rows (padding rows repeat row 0); the logits are cut back
        # to the real rows on the host.
        rows = logits_indices.shape[0]
        padded = bucket(rows, max(rows, self.max_num_reqs))
        self._sampled_rows = rows
        if padded > rows:
            logits_indices = torch.cat([logits_indices, logits_indices.new_zeros(padded - rows)])
        return (logits_indices.to(self.device), *rest)

    def warm_up_buckets(self) -> None:
        """Runs a forward pass, attention included, for every token bucket and every bucket of
        context blocks a batch of that many tokens can have, and the logits for every request
        bucket, so serving compiles nothing."""
        started = time.perf_counter()
        block_size = self.cache_config.block_size
        max_len = self.model_config.max_model_len
        max_requests = self.scheduler_config.max_num_seqs
        runs = 0
        for tokens in buckets(self.max_num_tokens):
            requests = min(tokens, max_requests)
            per_request = -(-tokens // requests)
            covered = set()
            context = -(-per_request // block_size) * block_size
            while context <= max_len:
                blocks = requests * (context // block_size)
                if blocks not in covered:
                    covered.add(blocks)
                    hidden_states, _ = self._dummy_run(
                        tokens, force_attention=True, profile_seq_lens=context
                    )
                    runs += 1
                context *= 2
            # The logits of each request bucket, gathered from this token bucket's rows.
            for rows in buckets(min(max_requests, tokens)):
                indices = torch.zeros(rows, dtype=torch.int64, device=self.device)
                self.model.compute_logits(hidden_states[indices])
        torch.tpu.synchronize(self.device)
        logger.info(
            "Warmed up %d bucketed forward passes in %.1f s.", runs, time.perf_counter() - started
        )
