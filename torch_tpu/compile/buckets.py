"""Which size bucket serves a dynamic dimension of a compiled graph.

A graph traced with symbolic sizes (``torch.compile(dynamic=True)``,
``torch._dynamo.mark_dynamic`` or Dynamo's automatic dynamic shapes) runs at the bucket
of each size, padded, so that every size in a bucket reuses one program (see
``torch_tpu.compile.padding``). The buckets of a dimension are, in this order of
precedence:

- ``options={"buckets": [64, 128, 512]}``: the smallest listed size that holds it;
- ``options={"bucket_size": b, "num_dynamic_buckets": k}`` (TorchTPU's options; either
  alone takes the other's default, b=128, k=8): b, 2b, 4b, ... up to ``b * 2**(k-1)``;
- neither: the next power of two (``TORCH_TPU_DYNAMIC_BUCKETS=0`` turns bucketing off).

A size beyond the largest bucket runs at its own size (a program of its own, said by
``TORCH_TPU_LOG_RECOMPILES=1``).

>>> BucketPolicy().bucket(17), BucketPolicy().bucket(512)
(32, 512)
>>> BucketPolicy(bucket_size=128, num_dynamic_buckets=3).bucket(300)
512
>>> BucketPolicy(buckets=[100, 200]).bucket(201)
201
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_BUCKET_SIZE = 128
DEFAULT_NUM_BUCKETS = 8


def enabled() -> bool:
    """Bucketing is on unless ``TORCH_TPU_DYNAMIC_BUCKETS=0``."""
    return os.environ.get("TORCH_TPU_DYNAMIC_BUCKETS", "1") != "0"


@dataclass(frozen=True)
class BucketPolicy:
    """The buckets of one compiled function (see the module docstring)."""

    bucket_size: int | None = None
    num_dynamic_buckets: int | None = None
    buckets: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.buckets is not None:
            sizes = tuple(self.buckets)
            if not sizes or any(not isinstance(s, int) or s < 1 for s in sizes):
                raise ValueError(
                    f"buckets must be a list of whole numbers of at least 1, got {self.buckets!r}"
                )
            object.__setattr__(self, "buckets", tuple(sorted(set(sizes))))
        if self.bucket_size is not None and not (
            isinstance(self.bucket_size, int) and self.bucket_size >= 1
        ):
            raise ValueError(
                f"bucket_size must be a whole number of at least 1, got {self.bucket_size!r}"
            )

    def ladder(self) -> Sequence[int] | None:
        """The bucket sizes when they are finite, else None (powers of two)."""
        if self.buckets is not None:
            return self.buckets
        if self.bucket_size is None and self.num_dynamic_buckets is None:
            return None
        size = self.bucket_size or DEFAULT_BUCKET_SIZE
        count = self.num_dynamic_buckets or DEFAULT_NUM_BUCKETS
        return tuple(size << i for i in range(count))

    def bucket(self, size: int) -> int:
        """The padded size that serves `size`."""
        ladder = self.ladder()
        if ladder is None:
            return 1 << max(size - 1, 0).bit_length()
        for candidate in ladder:
            if candidate >= size:
                return candidate
        return size
