"""Which ATen operators a script ran natively on tpu and which fell back to the CPU.

    python -m torch_tpu.coverage path/to/script.py [script arguments...]

Runs the script in this process, then prints, per operator, how many calls ran as
native tpu programs and how many through the CPU fallback.
"""

from __future__ import annotations

import runpy
import sys

import torch_tpu


def report(snapshot: dict) -> str:
    """A table of native and fallen-back operator calls from a metrics snapshot."""
    lines = []
    native, fallback = snapshot["native_ops"], snapshot["cpu_fallbacks"]
    lines.append(f"{len(native)} operators ran natively ({sum(native.values())} calls):")
    lines += [f"  {calls:8d}  {name}" for name, calls in sorted(native.items())]
    lines.append(
        f"{len(fallback)} operators fell back to the CPU ({sum(fallback.values())} calls):"
    )
    lines += [f"  {calls:8d}  {name}" for name, calls in sorted(fallback.items())]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    torch_tpu.metrics.reset()
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    finally:
        print("\n== torch_tpu coverage ==")
        print(report(torch_tpu.metrics.snapshot()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
