"""Per-task tables and run files: ``tasks.jsonl`` / ``tasks.csv`` written and read back, and ``read_run``,
which reads what ``eval compare`` is given (an episode log or a per-task table), every row checked.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from rewardkit.files.jsonl import kind, read_jsonl
from rewardkit.files.outputs import OutputSet
from rewardkit.runs.episodes.records import is_number, record_problem
from rewardkit.runs.stats.metrics import TABLE_COLUMNS, EvalError, TaskStats


def _line_number(path: Path, index: int) -> int:
    """The file line of the index-th non-blank line, counted as ``read_jsonl`` counts them (errors only)."""
    text = path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8")
    return [n for n, line in enumerate(text.split("\n"), 1) if line.strip()][index]


def _table_row(row: dict[str, Any]) -> TaskStats:
    trials, successes, infra = row.get("trials"), row.get("successes"), row.get("infra_errors", 0)
    if "task_id" not in row:
        raise ValueError("a task row needs 'task_id'")
    counts = (trials, successes, infra)
    if not (
        all(isinstance(n, int) and not isinstance(n, bool) for n in counts) and 0 <= successes <= trials and infra >= 0
    ):
        raise ValueError(f"a task row needs integers 0 <= 'successes' <= 'trials', got {successes!r}, {trials!r}")
    for name in ("mean_tcr", "mean_turns", "mean_tool_calls"):
        value = row.get(name)
        if value is not None and not (is_number(value) and value >= 0):
            raise ValueError(f"'{name}' must be a number >= 0 or null, got {kind(value)}")
    known = {f.name for f in fields(TaskStats)}
    return TaskStats(**{**{k: v for k, v in row.items() if k in known}, "task_id": str(row["task_id"])})


def _csv_value(name: str, text: str | None) -> Any:
    """A cell of ``tasks.csv`` as ``write_task_table`` wrote it: ints, floats, and empty for None."""
    if name == "task_id" or text is None:
        return text
    if text == "":
        return None
    try:
        return int(text) if name in ("trials", "successes", "infra_errors") else float(text)
    except ValueError:
        raise ValueError(f"'{name}' must be a number, got {text[:40]!r}") from None


def _read_csv(path: Path) -> list[TaskStats]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("task_id", "trials", "successes") if c not in (reader.fieldnames or ())]
        if missing:
            raise EvalError(
                f"{path}:1: a per-task table needs the columns {', '.join(TABLE_COLUMNS)}; no {', '.join(missing)}"
            )
        out = []
        for row in reader:
            try:
                out.append(_table_row({k: _csv_value(k, v) for k, v in row.items() if k in TABLE_COLUMNS}))
            except ValueError as exc:
                raise EvalError(f"{path}:{reader.line_num}: {exc} (in a task table)") from None
    return out


def read_run(path: str | Path) -> list[dict[str, Any]] | list[TaskStats]:
    """Episode records, or ``TaskStats`` when the file is a per-task table: ``tasks.csv`` (by its ``.csv``
    name), or JSONL rows with task_id, trials, successes (the first row decides). Every record is checked
    field by field (``records.record_problem``); one that does not fit raises ``EvalError`` naming
    ``file:line``. NaN and Infinity are not JSON: such a line is refused too.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return _read_csv(path)
    rows = read_jsonl(path, strict=True)  # JsonlError with file:line for a line that is not a JSON object
    table = bool(rows) and {"task_id", "trials", "successes"} <= rows[0].keys()
    out: list[Any] = []
    for i, row in enumerate(rows):
        try:
            if table:
                out.append(_table_row(row))
            elif problem := record_problem(row, log=False):
                raise ValueError(problem)
            else:
                out.append(row)
        except (ValueError, TypeError) as exc:
            what = "task table" if table else "episode file"
            raise EvalError(f"{path}:{_line_number(path, i)}: {exc} (in a {what})") from None
    return out


def write_task_table(
    stats: Sequence[TaskStats],
    jsonl_path: str | Path,
    csv_path: str | Path | None = None,
    outputs: OutputSet | None = None,
) -> None:
    """The per-task table as JSONL and CSV (``read_run`` reads both back); both land together or not at all,
    with the other outputs of ``outputs`` when given (committed by its owner)."""
    with contextlib.nullcontext(outputs) if outputs is not None else OutputSet() as staged:
        staged.write_text(
            jsonl_path, "".join(json.dumps(s.row(), ensure_ascii=False, allow_nan=False) + "\n" for s in stats)
        )
        if csv_path is not None:
            with staged.open(csv_path) as f:
                writer = csv.DictWriter(f, fieldnames=TABLE_COLUMNS, lineterminator="\n")
                writer.writeheader()
                writer.writerows(s.row() for s in stats)
