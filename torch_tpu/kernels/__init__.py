"""Custom kernels on tpu: JAX functions and Pallas kernels as PyTorch ops.

``jax_op`` needs JAX (``pip install 'torch_tpu[jax]'``), imported only when a kernel is
made; nothing else in torch_tpu does.
"""

from torch_tpu.kernels._lowering import UnsupportedKernelError
from torch_tpu.kernels.jax_op import jax_op

__all__ = ["UnsupportedKernelError", "jax_op"]
