"""vLLM on torch_tpu: a platform plugin (``vllm.platform_plugins`` entry point ``tpu``).

vLLM calls :func:`register` in every process that resolves its platform, the API server's
included, so it only checks that torch_tpu can be used (the extension imports and a PJRT plugin
is installed); it never opens a device. ``VLLM_TARGET_DEVICE=cpu`` still selects vLLM's own CPU
backend, as vLLM resolves that before asking plugins.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

PLATFORM = "torch_tpu.serving.platform.TpuPlatform"


def register() -> str | None:
    """The platform's qualified name when torch_tpu can serve, else None (with the reason)."""
    try:
        from torch_tpu._runtime import plugin
    except Exception as error:  # a broken install must not stop vLLM picking another platform
        logger.warning("torch_tpu's vLLM platform is off: torch_tpu does not import (%s)", error)
        return None
    try:
        plugin.find_plugin()
    except Exception as error:
        logger.warning("torch_tpu's vLLM platform is off: %s", error)
        return None
    return PLATFORM
