"""The chips torch_tpu compiles for without one, and how their target names are read.

A target is a chip and a topology: ``v6e:2x2`` (a TPU v6e slice of 2x2 chips), ``tpu7x:2x2x1``,
``h100`` (one H100), ``h100:1x2x8`` (two hosts of eight H100s). Names are checked here, before
anything reaches a plugin: some plugins abort the process on a bad option.

>>> parse("v6e").topology, parse("h100:1x2x8").devices
('1x1', 16)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch_tpu._runtime.peak_flops import GPU_PEAK_FLOPS, TPU_HBM_BYTES, TPU_PEAK_FLOPS


@dataclass(frozen=True)
class Chip:
    """What the roofline and the memory check need of one chip (datasheet figures)."""

    name: str  # the target's chip name: "v6e", "h100"
    platform: str  # the PJRT platform that runs it: "tpu" or "cuda"
    dims: int  # numbers in its topology: 2 ("2x2"), 3 ("2x2x1"; GPUs: partitions x hosts x devices)
    devices_per_chip: int  # TPU7x: two TensorCores, each its own device
    peak_flops: float  # dense bf16 FLOP/s per device
    hbm_bytes: int  # HBM per device
    hbm_bandwidth: float  # bytes/s per device
    link_bandwidth: float  # bytes/s a device sends to its peers (TPU: ICI; GPU: NVLink)


def _tpu(name, table_name, dims, hbm_bandwidth, ici_bandwidth, devices_per_chip=1, per_chip=False):
    # peak_flops.py's table is per device as a TPU VM shows them: a v4 chip's two cores as one
    # (megacore), a TPU7x chip's as two. libtpu's compile-only topologies show each core of
    # both as a device, so the v4's chip figures are split here.
    split = devices_per_chip if per_chip else 1
    return Chip(
        name,
        "tpu",
        dims,
        devices_per_chip,
        TPU_PEAK_FLOPS[table_name] / split,
        TPU_HBM_BYTES[table_name] // split,
        hbm_bandwidth / devices_per_chip,
        ici_bandwidth / devices_per_chip,
    )


def _gpu(name, table_name, hbm_bytes, hbm_bandwidth, nvlink_bandwidth):
    return Chip(
        name, "cuda", 3, 1, GPU_PEAK_FLOPS[table_name], hbm_bytes, hbm_bandwidth, nvlink_bandwidth
    )


# Bandwidths per chip from the vendors' system-architecture pages (HBM; inter-chip links,
# both directions of every link added up).
CHIPS = {
    chip.name: chip
    for chip in (
        _tpu("v4", "TPU v4", 3, 1.2e12, 300e9, devices_per_chip=2, per_chip=True),
        _tpu("v5e", "TPU v5e", 2, 819e9, 200e9),
        _tpu("v5p", "TPU v5p", 3, 2.765e12, 600e9),
        _tpu("v6e", "TPU v6e", 2, 1.64e12, 448e9),
        _tpu("tpu7x", "TPU v7", 3, 7.37e12, 1.2e12, devices_per_chip=2),
        _gpu("a100", "A100", 80 * 10**9, 2.039e12, 600e9),
        _gpu("h100", "H100", 80 * 10**9, 3.35e12, 900e9),
        _gpu("h200", "H200", 141 * 10**9, 4.8e12, 900e9),
        _gpu("b200", "B200", 180 * 10**9, 8.0e12, 1.8e12),
    )
}

# libtpu's spellings of the same chips, accepted as aliases.
_ALIASES = {"tpu7x": "tpu7x", "TPU7x": "tpu7x", "v5litepod": "v5e", "v6litepod": "v6e"}

# At most this many chips in a topology (the largest TPU pods).
_MAX_CHIPS = 9216


class TargetNameError(ValueError):
    """A target name that names no chip or no valid topology; the message lists the valid ones."""


@dataclass(frozen=True)
class TargetName:
    """A checked target name: ``chip``, its ``topology`` as the plugin spells it, and counts."""

    text: str  # as given: "v6e:2x2"
    chip: Chip
    topology: str  # "2x2"; GPUs: "1x2x8"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.topology.split("x"))

    @property
    def chips(self) -> int:
        count = 1
        for n in self.shape:
            count *= n
        return count

    @property
    def devices(self) -> int:
        return self.chips * self.chip.devices_per_chip


def valid_names() -> str:
    """One line listing the chips and the topology forms each takes."""
    tpus = [f"{c.name}:{'x'.join(['2'] * c.dims)}" for c in CHIPS.values() if c.platform == "tpu"]
    gpus = [c.name for c in CHIPS.values() if c.platform == "cuda"]
    return (
        f"TPUs {', '.join(tpus)} (any shape with that many numbers), "
        f"NVIDIA {', '.join(gpus)} (alone for one GPU, or :PxHxD such as h100:1x2x8)"
    )


def parse(text: str) -> TargetName:
    """Reads a target name; raises TargetNameError naming what is wrong and the valid names.

    >>> parse("tpu7x:2x2x1").devices
    8
    """
    if not isinstance(text, str) or not text.strip():
        raise TargetNameError(f"empty target name; valid targets: {valid_names()}")
    chip_name, _, shape = text.strip().partition(":")
    chip = CHIPS.get(_ALIASES.get(chip_name, chip_name.lower()))
    if chip is None:
        raise TargetNameError(
            f"unknown target chip {chip_name!r} in {text!r}; valid targets: {valid_names()}"
        )
    if not shape:
        shape = "x".join(["1"] * chip.dims)
    if not re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)*", shape) or len(shape.split("x")) != chip.dims:
        form = "x".join(["N"] * chip.dims)
        raise TargetNameError(
            f"target {text!r}: the topology of {chip.name} is {form} (positive whole numbers), "
            f"got {shape!r}; valid targets: {valid_names()}"
        )
    name = TargetName(text.strip(), chip, shape)
    if name.chips > _MAX_CHIPS:
        raise TargetNameError(f"target {text!r} has {name.chips} chips; at most {_MAX_CHIPS}")
    return name
