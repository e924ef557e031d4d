"""The padded sizes a serving step runs at: powers of two, capped by the batch limits.

Every distinct shape is a compiled program (in compiled mode and in defer_and_fuse eager
mode alike), so a server that ran each step at its exact token count would compile for as
long as it serves. Padding to powers of two bounds the programs to about log2 of each limit.
"""

from __future__ import annotations

# Smallest bucket: decode batches of a few requests share one program.
SMALLEST = 8


def bucket(size: int, limit: int) -> int:
    """The bucket for `size`: the next power of two from SMALLEST, at most `limit` (which is
    itself a bucket, so the largest batch runs unpadded)."""
    if size > limit:
        raise ValueError(f"size {size} is over its limit {limit}")
    padded = SMALLEST
    while padded < size:
        padded *= 2
    return min(padded, limit)


def buckets(limit: int) -> list[int]:
    """Every bucket up to `limit`, smallest first."""
    sizes = []
    padded = SMALLEST
    while padded < limit:
        sizes.append(padded)
        padded *= 2
    sizes.append(limit)
    return sizes
