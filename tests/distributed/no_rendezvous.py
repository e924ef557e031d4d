"""init_process_group without a rendezvous (no MASTER_ADDR) raises as PyTorch does."""

import os

from common import dist, torch  # noqa: F401

os.environ.pop("MASTER_ADDR", None)
try:
    dist.init_process_group("tpu")
except ValueError as error:
    assert "MASTER_ADDR" in str(error), error
    print("raised:", error)
else:
    raise AssertionError("init_process_group without MASTER_ADDR did not raise")
