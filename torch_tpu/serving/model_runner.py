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

import torch_tpu
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
            # defer_and_fuse: the rows' gather (execute_model keeps its result) is a graph
            # of its own, so none of it is left pending into the next step's graph.
            torch_tpu.sync()
            logits = compute_logits(hidden_states).to(HOST)
            rows, self._sampled_rows = self._sampled_rows, None
            return logits if rows is None else logits[:rows]

        self.model.compute_logits = logits_on_host

        # The runner (and its dummy runs) hand the model host tensors: send them over.
        forward = self.model.forward

        def forward_on_device(*args, **kwargs):
            args = [_to(value, self.device) for value in args]
            kwargs = {name: _to(value, self.device) for name, value in kwargs.items()}
            hidden_states = forward(*args, **kwargs)
            # defer_and_fuse: end the step's forward graph here, so it is one program per
            # (token bucket, context-block bucket) and the logits another per (token bucket,
            # request bucket), each warmed up on its own.
            torch_tpu.sync()
            return hidden_states

        self.model.forward = forward_on_device

    def initialize_kv_cache(self, *args, **kwargs) -> None:
        super().initialize_kv_cache(*args, **kwargs)
        # vLLM allocates the caches as bytes and views them in the model's dtype. Writing each
        # once in that dtype settles how its device buffer is typed, so the first step's
        # programs (warm-up's) take the same inputs as every later step's.
        for cache in self.kv_caches:
            if isinstance(cache, torch.Tensor):
                cache.zero_()
        torch_tpu.sync()

    @contextlib.contextmanager
    def _on_host(self):
        """vLLM's bookkeeping and sampling code makes its tensors (and per-request seeded
        generators) on self.device; here those belong on the host."""
        device, self.device = self.device, HOST
        try:
            yield
        finally:
            self.device = device

    def _update_states(self, scheduler_output):
        with self._on_host():
            return super()._update_states(scheduler_output)

    def _dummy_sampler_run(self, hidden_states: torch.Tensor) -> torch.Tensor:
        with self._on_host():
            return super()._dummy_sampler_run(hidden_states)

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
        # Left on the host: the gather after the forward pass sends it (an upload recorded
        # before the forward would make the step's fused graph differ from warm-up's).
        return (logits_indices, *rest)

    def warm_up_buckets(self) -> None:
        """Runs a forward pass, attention included, for every token bucket and every bucket of
        context blocks a batch of that many tokens can have, and the logits for every request
        bucket, so serving compiles nothing."""
        started = time.perf_counter()
        block_size = self.cache_config.block_size
        max_len = self.model_config.max_model_len
        max_requests = self.scheduler_config.max_num_seqs
        runs = 0
        torch_tpu.sync()  # whatever the profile run left pending is not part of warm-up's graphs
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
                    # The dummy run gathers rows of its own after the forward pass: run
                    # them now, so they are not recorded into the next pass's graph.
                    torch_tpu.sync()
                    runs += 1
                context *= 2
            # The logits of each request bucket, gathered from this token bucket's rows.
            for rows in buckets(min(max_requests, tokens)):
                # Host indices, as execute_model's logits_indices are.
                self.model.compute_logits(hidden_states[torch.zeros(rows, dtype=torch.int32)])
        torch.tpu.synchronize(self.device)
        logger.info(
            "Warmed up %d bucketed forward passes in %.1f s.", runs, time.perf_counter() - started
        )
