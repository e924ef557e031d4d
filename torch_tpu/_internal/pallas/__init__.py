"""``torch_tpu._internal.pallas``: TorchTPU's kernel-launch names, as Helion calls them."""

from torch_tpu.kernels.jax_op import jax_op

__all__ = ["jax_op"]
