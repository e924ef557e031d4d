"""torch_tpu: PyTorch's ``tpu`` device, served by a PJRT plugin.

>>> import torch, torch_tpu
>>> x = torch.randn(4, 4, device="tpu")
>>> (x @ x.T).relu().sum().item()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys

from torch_tpu._runtime import versions as _versions

__version__ = "0.1.0"  # part of the disk cache's key: set before the cache is configured

_versions.check_torch()

import torch  # noqa: E402

from torch_tpu._runtime import plugin as _plugin  # noqa: E402

_PLUGIN_PATH, _PLATFORM = _plugin.find_plugin()
_versions.check_cpu_plugin(_PLATFORM)

from torch_tpu import _C  # noqa: E402

if os.environ.get("TORCH_TPU_ALSO_COMPILE_FOR"):
    # Programs checked for a TPU or GPU must be the ones it runs: no XLA:CPU host kernels.
    os.environ.setdefault("TORCH_TPU_XLA_CPU_SHORTCUTS", "0")
_CLIENT_OPTIONS = _plugin.client_options(_PLATFORM)
if _CLIENT_OPTIONS:
    # The CPU plugin logs every create option at INFO level; that is noise to users.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
from torch_tpu._runtime import job as _job  # noqa: E402

_job.initialize_client(_C._initialize, _PLUGIN_PATH, _PLATFORM, _CLIENT_OPTIONS)

torch.utils.rename_privateuse1_backend("tpu")

from torch_tpu import (  # noqa: E402
    cache,  # noqa: E402,F401
    metrics,  # noqa: E402,F401
)
from torch_tpu import device as _device_module  # noqa: E402
from torch_tpu import eager as _eager_module  # noqa: E402
from torch_tpu._runtime import autograd_threads as _autograd_threads  # noqa: E402
from torch_tpu._runtime import dlpack as _dlpack  # noqa: E402
from torch_tpu._runtime import printing as _printing  # noqa: E402
from torch_tpu.eager import eager_mode, get_eager_mode, set_eager_mode, sync  # noqa: E402
from torch_tpu.eager_buckets import set_dynamic_buckets  # noqa: E402

cache._configure_from_environment()
_device_module._set_chip_capacities()
_printing.install()
_dlpack.install()
_autograd_threads.start(_C._device_count())

_device_module._install_eager_mode_property()
_eager_module._install_optimizer_step_sync()
torch._register_device_module("tpu", _device_module)

from torch_tpu.kernels import pallas as _pallas  # noqa: E402  (JAX is imported on first use)

_device_module.pallas = _pallas  # torch.tpu.pallas.jax_op, TorchTPU's name
sys.modules["torch.tpu.pallas"] = _pallas
_device_module._set_autocast_default()
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from torch_tpu.compile import hook as _compile_hook  # noqa: E402

_compile_hook.install()  # torch.compile(backend="tpu"), without importing Dynamo now

from torch_tpu import ops  # noqa: E402
from torch_tpu.titan import _hook as _titan_hook  # noqa: E402

ops.install_all()  # operators written in Python: see torch_tpu/ops/__init__.py

_titan_hook.install()  # TorchTitan's MFU uses our peak FLOP/s, when TorchTitan loads

from torch_tpu import distributed  # noqa: E402

distributed._use_rank_device()
distributed._register()
_device_module.distributed = distributed  # torch.tpu.distributed, TorchTPU's name
sys.modules["torch.tpu.distributed"] = distributed

from torch_tpu.targets import environment as _targets_environment  # noqa: E402

_targets_environment.start_from_environment()  # TORCH_TPU_ALSO_COMPILE_FOR=v6e:1x1,h100

from torch_tpu import eager_buckets as _eager_buckets  # noqa: E402

_eager_buckets._configure_from_environment()  # TORCH_TPU_EAGER_BUCKETS=1, last: it records ops

__all__ = [
    "cache",
    "coverage",
    "distributed",
    "eager_mode",
    "get_eager_mode",
    "metrics",
    "platform",
    "plugin_info",
    "set_dynamic_buckets",
    "set_eager_mode",
    "sync",
]


def platform() -> str:
    """The platform serving the ``tpu`` device: ``"tpu"``, ``"cuda"``, ``"cpu"`` (or ``"custom"``).

    >>> torch_tpu.platform()  # doctest: +SKIP
    'cpu'
    """
    return _PLATFORM


def plugin_info() -> dict:
    """The loaded PJRT plugin: path, C API version, platform name and version, attributes,
    and whether the CPU plugin's speed shortcuts are taken (``xla_cpu_shortcuts``: off with
    ``TORCH_TPU_XLA_CPU_SHORTCUTS=0`` and on every other platform).

    >>> torch_tpu.plugin_info()["api_version"]  # doctest: +SKIP
    '0.81'
    """
    return _C._plugin_info()


def coverage() -> list[str]:
    """The ATen operator overloads with a native tpu kernel (everything else falls back to CPU).

    >>> "aten::mm" in torch_tpu.coverage()
    True
    """
    names = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(name for name in names if name.startswith("aten::"))
