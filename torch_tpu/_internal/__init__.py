"""Google TorchTPU's private module paths that other projects import (Helion's Pallas
backend): the few names they use, implemented on torch_tpu.kernels. Not an API of ours."""
