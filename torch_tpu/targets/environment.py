"""``TORCH_TPU_ALSO_COMPILE_FOR=v6e:1x1,h100``: check every program of this process for those
targets, and print a summary per target when the process exits (the full table:
``python -m torch_tpu.target_check``)."""

from __future__ import annotations

import atexit
import os
import sys

VARIABLE = "TORCH_TPU_ALSO_COMPILE_FOR"


def requested() -> list[str]:
    """The target names the variable lists (empty when unset)."""
    return [name.strip() for name in os.environ.get(VARIABLE, "").split(",") if name.strip()]


def start_from_environment() -> None:
    """Starts the check if the variable is set (called by ``import torch_tpu``). A bad name or
    a missing compiler raises here, at import, naming the variable."""
    names = requested()
    if not names:
        return
    from torch_tpu import targets

    try:
        check = targets.start(names)
    except (targets.TargetNameError, targets.TargetUnavailableError) as error:
        raise type(error)(f"{VARIABLE}: {error}") from None

    def summary() -> None:
        from torch_tpu.targets import report

        results = report.annotate(check.finish())
        for name in [t.name.text for t in check.targets]:
            rows = [r for r in results if r["target"] == name]
            bad = report.failures(rows)
            print(
                f"torch_tpu: {name}: {len(rows) - len(bad)} of {len(rows)} programs compiled "
                f"and fit",
                file=sys.stderr,
            )
            for r in bad[:5]:
                why = (r["error"] or "over the chip's memory").strip().splitlines()[0]
                print(f"  {r['label'] or 'program'}: {why}", file=sys.stderr)

    atexit.register(summary)
