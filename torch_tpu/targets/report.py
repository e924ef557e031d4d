"""The target check's table: per target, what compiled, what was refused and why, and what
the compiler says each program needs (memory against the chip's HBM, flops, bytes, a roofline
time from the chip's datasheet peaks)."""

from __future__ import annotations

from collections import defaultdict

from torch_tpu.targets.chips import Chip, parse


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def roofline_seconds(result: dict, chip: Chip) -> float | None:
    """A lower bound on one run: the larger of compute at peak and memory traffic at HBM
    bandwidth. TPU: the compiler's flops and bytes accessed; GPU (no cost analysis): the
    arguments read and the outputs written once."""
    costs, memory = result.get("costs") or {}, result.get("memory")
    if "flops" in costs or "bytes accessed" in costs:
        flops = costs.get("flops", 0.0)
        moved = costs.get("bytes accessed", 0.0)
    elif memory is not None:
        flops = 0.0
        moved = memory["arguments"] + memory["outputs"]
    else:
        return None
    return max(flops / chip.peak_flops, moved / chip.hbm_bandwidth)


def device_memory(target: str) -> int:
    """The bytes a program may use on one device of ``target``: what its compiler reports
    (``device_memory_bytes_limit``, a little under the datasheet's HBM), else the datasheet's."""
    from torch_tpu import targets

    devices = targets.load(target).devices()
    limit = devices[0]["attributes"].get("device_memory_bytes_limit") if devices else None
    return int(limit[0]) if limit else parse(target).chip.hbm_bytes


def annotate(results: list[dict]) -> list[dict]:
    """Adds each result's ``hbm_bytes``, ``fits`` (peak memory within them) and ``roofline_s``."""
    limits: dict[str, int] = {}
    for result in results:
        chip = parse(result["target"]).chip
        memory = result.get("memory")
        if result["target"] not in limits:
            limits[result["target"]] = device_memory(result["target"])
        result["hbm_bytes"] = limits[result["target"]]
        result["fits"] = memory is None or memory["peak"] <= result["hbm_bytes"]
        result["roofline_s"] = roofline_seconds(result, chip) if result["compiled"] else None
    return results


def failures(results: list[dict]) -> list[dict]:
    """The results that make the check fail: refused, or over the device's HBM."""
    return [r for r in results if not r["compiled"] or not r.get("fits", True)]


def format_table(results: list[dict], top: int = 10) -> str:
    """The report, one section per target, in the order the targets were given."""
    by_target: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        by_target[result["target"]].append(result)
    lines = []
    for target, rows in by_target.items():
        name = parse(target)
        chip = name.chip
        compiled = [r for r in rows if r["compiled"]]
        refused = [r for r in rows if not r["compiled"]]
        over = [r for r in compiled if not r.get("fits", True)]
        hbm = rows[0].get("hbm_bytes", chip.hbm_bytes)
        lines.append(
            f"== {target}: {name.devices} device(s), per device {_bytes(hbm)} HBM, "
            f"{chip.peak_flops / 1e12:.0f} TFLOP/s bf16, {chip.hbm_bandwidth / 1e12:.2f} TB/s"
        )
        lines.append(
            f"programs: {len(rows)}; compiled {len(compiled)}, refused {len(refused)}, "
            f"over HBM {len(over)}; compile time {sum(r['seconds'] for r in rows):.1f} s"
        )
        flops = sum((r.get("costs") or {}).get("flops", 0.0) * r.get("uses", 1) for r in compiled)
        moved = sum(
            (r.get("costs") or {}).get("bytes accessed", 0.0) * r.get("uses", 1) for r in compiled
        )
        roofline = sum((r.get("roofline_s") or 0.0) * r.get("uses", 1) for r in compiled)
        peak = max((r["memory"]["peak"] for r in compiled if r.get("memory")), default=None)
        cost_note = (
            f"{flops / 1e9:.3f} GFLOP, {_bytes(moved)} accessed, "
            if any(r.get("costs") for r in compiled)
            else "(no cost analysis from this compiler: roofline from argument and output bytes) "
        )
        lines.append(
            f"every program, once per load: {cost_note}roofline {_seconds(roofline)}; "
            f"largest peak memory {_bytes(peak)}"
        )
        if compiled:
            lines.append(
                f"  {'program':<32} {'peak':>10} {'args':>10} {'temps':>10} {'outputs':>10} "
                f"{'code':>10} {'GFLOP':>9} {'accessed':>10} {'roofline':>10} {'compile':>9}"
            )
            ranked = sorted(compiled, key=lambda r: -(r["memory"] or {}).get("peak", 0))
            for r in ranked[:top]:
                m = r["memory"] or {}
                costs = r.get("costs") or {}
                gflop = f"{costs['flops'] / 1e9:.3f}" if "flops" in costs else "-"
                mark = " OVER HBM" if not r.get("fits", True) else ""
                lines.append(
                    f"  {r['label'][:32]:<32} {_bytes(m.get('peak')):>10} "
                    f"{_bytes(m.get('arguments')):>10} {_bytes(m.get('temporaries')):>10} "
                    f"{_bytes(m.get('outputs')):>10} {_bytes(m.get('code')):>10} {gflop:>9} "
                    f"{_bytes(costs.get('bytes accessed')):>10} "
                    f"{_seconds(r.get('roofline_s')):>10} {r['seconds']:>8.2f}s{mark}"
                )
            if len(ranked) > top:
                lines.append(f"  ... {len(ranked) - top} more (--json has every program)")
        for r in (r for r in compiled if r.get("note")):
            lines.append(f"  NOTE {r['label'] or 'program'}: {r['note']}")
        for r in refused:
            message = (r["error"] or "").strip().splitlines()
            lines.append(f"  REFUSED {r['label'] or 'program'}: {message[0] if message else '?'}")
            for more in message[1:4]:
                lines.append(f"      {more}")
            if r.get("dump_path"):
                lines.append(f"      program: {r['dump_path']}")
        lines.append("")
    return "\n".join(lines)
