"""The conformance runner's records, and what it prints: the per-file table, the failures
grouped by cause, the crashed and timed-out tests, and the JSON summary.

Also the normalisation of a failure's message into a *cause*: the same bug hit by many
tests (every dtype, every shape) has one message up to numbers, addresses, shapes and
dtypes, so those are replaced by placeholders and the failures group together.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterable, Sequence

# Every outcome a test can have, in the table's column order. "not_run": the file ran out
# of time (or restarts) before reaching the test.
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "crashed", "timeout", "not_run")
# What counts against the pass rate: every outcome that ran the test and did not skip it.
_ATTEMPTED = ("passed", "failed", "error", "crashed", "timeout")
_FAILURES = ("failed", "error")
# The table's header of an outcome, where it differs from the outcome's name.
_COLUMNS = {"error": "errors", "not_run": "not run"}

_RAW_LIMIT = 300
_CAUSE_LIMIT = 200


@dataclasses.dataclass
class TestRecord:
    """One test's result. A file-level problem (an import error, a crash outside any
    test) is a record too, named after the file, so that it shows in the counts."""

    __test__ = False  # not a pytest test class, despite the name

    file: str
    nodeid: str
    outcome: str
    cause: str = ""  # normalised: what failures are grouped by
    raw: str = ""  # the first line of the message as raised (truncated)
    seconds: float = 0.0
    log_tail: str = ""  # the end of the pytest log, for crashes and file-level problems
    fails_on_cpu: bool = False  # --check-on-cpu: it does not pass on PyTorch's CPU device
    cpu_outcome: str = ""  # "skipped" where the CPU does not run it at all


@dataclasses.dataclass
class FileResult:
    file: str
    records: list[TestRecord]
    seconds: float
    attempts: int = 1  # pytest processes started: 1 + restarts
    notes: list[str] = dataclasses.field(default_factory=list)
    log: str | None = None  # the pytest log, where it is kept


# --- causes ----------------------------------------------------------------------------

_DEVICE = re.compile(r"\b(tpu|privateuse1|cuda|xla|cpu):\d+\b")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_TEMP_PATH = re.compile(r"/tmp/\S+")
_DTYPE = re.compile(
    r"\btorch\.(?:float|bfloat|half|double|int|uint|long|short|complex|bool|cfloat)\w*"
    r"|\b(?:float(?:8\w*|16|32|64)|bfloat16|u?int(?:8|16|32|64)|complex(?:32|64|128)"
    r"|ComplexFloat|ComplexDouble|ComplexHalf|BFloat16|Float|Double|Half|Long|Int|Short"
    r"|Char|Byte|Bool)\b"
)
_DIMS = re.compile(r"(?<![\w.])\d+(?:x\d+)+\b")  # 2x3 in "shapes cannot be multiplied"
# A number that stands alone: digits inside a name (log1p, conv2d) are part of the name.
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?!x)")  # not 0x?
_LIST = re.compile(r"\[\s*-?N(?:\s*,\s*-?N)*\s*,?\s*\]")
_TUPLE = re.compile(r"\(\s*-?N\s*,(?:\s*-?N\s*,?)*\s*\)")  # at least one comma: a shape
_SPACES = re.compile(r"\s+")


def first_line(text: str, limit: int = _RAW_LIMIT) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def normalize_message(message: str) -> str:
    """``message`` with what differs between similar failures replaced: devices'
    indices, addresses, temporary paths, dtypes (``DTYPE``), numbers (``N``) and shapes
    (``[...]``, ``(...)``)."""
    text = _DEVICE.sub(r"\1", message)
    text = _HEX.sub("0x?", text)
    text = _TEMP_PATH.sub("/tmp/...", text)
    text = _DTYPE.sub("DTYPE", text)
    text = _DIMS.sub("NxN", text)
    text = _NUMBER.sub("N", text)
    text = _LIST.sub("[...]", text)
    text = _TUPLE.sub("(...)", text)
    return _SPACES.sub(" ", text).strip()


def normalize_cause(exception_name: str, message: str) -> str:
    """The grouping key of a failure: the exception's class name and the first line of its
    message, normalised (see ``normalize_message``)."""
    line = normalize_message(first_line(message, limit=1000))
    if not exception_name:
        return line[:_CAUSE_LIMIT]
    return f"{exception_name}: {line}"[:_CAUSE_LIMIT] if line else exception_name


# --- counting --------------------------------------------------------------------------


def count(records: Iterable[TestRecord]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for record in records:
        counts[record.outcome] = counts.get(record.outcome, 0) + 1
    return counts


def pass_rate(counts: dict[str, int]) -> float | None:
    """passed / (passed + failed + errors + crashed + timeout); None when none ran."""
    attempted = sum(counts[o] for o in _ATTEMPTED)
    return 100.0 * counts["passed"] / attempted if attempted else None


def summary_row(name: str, records: Sequence[TestRecord], seconds: float) -> dict:
    counts = count(records)
    on_cpu = sum(1 for r in records if r.fails_on_cpu)
    attempted = sum(counts[o] for o in _ATTEMPTED) - on_cpu
    # --check-on-cpu: the pass rate without the tests that fail on PyTorch's CPU device too
    own = 100.0 * counts["passed"] / attempted if attempted else None
    return {"file": name, **counts, "pass_percent": pass_rate(counts), "seconds": seconds,
            "fail_on_cpu_too": on_cpu, "pass_percent_without_them": own}  # fmt: skip


def progress_line(result: FileResult) -> str:
    """One line for the terminal once a file is done: its non-zero counts, time, restarts."""
    counts = count(result.records)
    parts = [f"{counts[o]} {_COLUMNS.get(o, o)}" for o in OUTCOMES if counts[o]] or ["no tests"]
    line = f"{', '.join(parts)} in {result.seconds:.0f} s"
    if result.attempts > 1:
        line += f" ({result.attempts - 1} restart{'s' if result.attempts > 2 else ''})"
    return line + "".join(f"; {note}" for note in result.notes)


# --- the table -------------------------------------------------------------------------


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table padded into columns, so it reads in a terminal and pastes as is."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1f}"


def _cells(row: dict, cpu_checked: bool) -> list[str]:
    cells = [row["file"], *(str(row[o]) for o in OUTCOMES), _percent(row["pass_percent"])]
    if cpu_checked:
        cells += [str(row["fail_on_cpu_too"]), _percent(row["pass_percent_without_them"])]
    return cells + [f"{row['seconds']:.0f}"]


def format_table(results: Sequence[FileResult], cpu_checked: bool = False) -> str:
    """With cpu_checked (--check-on-cpu), two more columns: the failures that fail on the
    CPU device too, and the pass rate without them."""
    rows = [summary_row(r.file, r.records, r.seconds) for r in results]
    every = [record for r in results for record in r.records]
    rows.append(summary_row("TOTAL", every, sum(r.seconds for r in results)))
    header = ["file", *(_COLUMNS.get(o, o) for o in OUTCOMES), "pass %"]
    if cpu_checked:
        header += ["not passing on CPU", "pass % without them"]
    header.append("seconds")
    return _markdown_table(header, [_cells(row, cpu_checked) for row in rows])


# --- failures grouped by cause ---------------------------------------------------------


@dataclasses.dataclass
class CauseGroup:
    cause: str
    count: int
    files: dict[str, int]  # file -> failures with this cause there, most first
    examples: list[str]  # the first two test ids


def group_failures(records: Iterable[TestRecord]) -> list[CauseGroup]:
    """Failed and errored tests grouped by cause, the most frequent cause first."""
    by_cause: dict[str, list[TestRecord]] = collections.defaultdict(list)
    for record in records:
        if record.outcome in _FAILURES:
            cause = record.cause or "(no message)"
            label = ""
            if record.fails_on_cpu:
                label = "[not run on CPU] " if record.cpu_outcome else "[fails on CPU too] "
            by_cause[label + cause].append(record)
    groups = [
        CauseGroup(
            cause=cause,
            count=len(members),
            files=dict(collections.Counter(m.file for m in members).most_common()),
            examples=[m.nodeid for m in members[:2]],
        )
        for cause, members in by_cause.items()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.cause))


def format_groups(groups: Sequence[CauseGroup], top: int) -> str:
    total = sum(g.count for g in groups)
    shown = groups[:top]
    lines = [f"## failures grouped by cause (top {len(shown)} of {len(groups)}; {total} failures)"]
    if not groups:
        return lines[0] + "\n\nnone"
    for index, group in enumerate(shown, 1):
        files = ", ".join(f"{f} ({n})" for f, n in group.files.items())
        examples = ", ".join(f"`{e}`" for e in group.examples)
        lines += ["", f"{index}. {group.count} x {group.cause}", f"   - files: {files}"]
        lines.append(f"   - e.g. {examples}")
    return "\n".join(lines)


def format_incidents(results: Sequence[FileResult]) -> str:
    """The crashed and timed-out tests (each was skipped on the restart that followed),
    and the notes of files that stopped early."""
    lines = ["## crashed and timed-out tests", ""]
    incidents = [
        f"- {r.outcome} ({r.cause}): `{r.nodeid}`"
        for result in results
        for r in result.records
        if r.outcome in ("crashed", "timeout")
    ]
    lines += incidents or ["none"]
    notes = [f"- {result.file}: {note}" for result in results for note in result.notes]
    if notes:
        lines += ["", "## notes", "", *notes]
    return "\n".join(lines)


def format_report(results: Sequence[FileResult], top: int, cpu_checked: bool = False) -> str:
    every = [record for r in results for record in r.records]
    return "\n\n".join(
        [
            format_table(results, cpu_checked),
            format_groups(group_failures(every), top),
            format_incidents(results),
        ]
    )


def to_json(results: Sequence[FileResult], context: dict) -> dict:
    """Everything: ``context`` (versions, options), one summary row per file and the
    total, the cause groups and every test's record."""
    every = [record for r in results for record in r.records]
    files = [
        {
            **summary_row(r.file, r.records, r.seconds),
            "attempts": r.attempts,
            "notes": r.notes,
            "log": r.log,
        }
        for r in results
    ]
    return {
        **context,
        "files": files,
        "total": summary_row("TOTAL", every, sum(r.seconds for r in results)),
        "groups": [dataclasses.asdict(g) for g in group_failures(every)],
        "tests": [dataclasses.asdict(r) for r in every],
    }
