"""``torch.tpu.pallas``: TorchTPU's name for calling JAX and Pallas kernels from PyTorch.

>>> from torch.tpu.pallas import jax_op  # doctest: +SKIP
"""

from torch_tpu.kernels.jax_op import jax_op

__all__ = ["jax_op"]
