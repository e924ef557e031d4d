"""``python -m torch_tpu.conformance PATH_TO_PYTORCH/test [files...]``: runs PyTorch's own
device-generic test files (test_view_ops.py, test_indexing.py, test_nn.py, ...) on the tpu
device, one pytest process per file, and prints a table of passed, failed, skipped,
crashed and timed-out tests with the failures grouped by cause. A test that crashes the
process or hangs is recorded as such and the file goes on without it. See
docs/conformance.md.
"""

from torch_tpu.conformance.cli import main

__all__ = ["main"]
