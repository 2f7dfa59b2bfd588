"""JSONL reading and build reports shared by every builder.

Every record a builder reads ends up either written or rejected with a reason,
so ``read == written + sum(rejected)`` holds for any input and any --on-error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

OnError = Literal["stop", "skip"]


class BuildError(ValueError):
    """Malformed input under ``--on-error stop``; the message names file and line."""


@dataclass(frozen=True)
class Record:
    source: str  # "file:line", for error messages and the rejects file
    data: Mapping[str, Any]


@dataclass
class BuildReport:
    read: int = 0
    written: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    rejects: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, record: Record | str, reason: str, detail: str = "") -> None:
        self.rejected[reason] += 1
        source = record if isinstance(record, str) else record.source
        data = None if isinstance(record, str) else dict(record.data)
        self.rejects.append({"source": source, "reason": reason, "detail": detail, "record": data})

    def check(self) -> None:
        total = self.written + sum(self.rejected.values())
        if total != self.read:
            raise AssertionError(f"counts do not reconcile: read {self.read} != written+rejected {total}")

    def as_dict(self) -> dict[str, Any]:
        return {"read": self.read, "written": self.written, "rejected": dict(sorted(self.rejected.items()))}

    def render(self) -> str:
        lines = [f"read {self.read}  written {self.written}  rejected {sum(self.rejected.values())}"]
        lines += [f"  {reason:<28} {n}" for reason, n in sorted(self.rejected.items())]
        return "\n".join(lines)


def read_records(
    path: str | Path, report: BuildReport, required: Sequence[str], on_error: OnError = "stop"
) -> Iterator[Record]:
    """Yield one Record per non-blank line; malformed lines stop or are rejected."""
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            report.read += 1
            source = f"{path}:{lineno}"
            problem = _problem(line, required)
            if problem is None:
                yield Record(source, json.loads(line))
                continue
            if on_error == "stop":
                raise BuildError(f"{source}: {problem} (use --on-error skip to reject such lines and go on)")
            report.reject(source, "malformed", problem)


def _problem(line: str, required: Sequence[str]) -> str | None:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(data, dict):
        return "a record must be a JSON object"
    missing = [k for k in required if k not in data]
    return f"missing field(s) {missing}" if missing else None


def write_jsonl(rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
