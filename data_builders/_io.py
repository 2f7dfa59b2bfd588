"""JSONL reading and build reports shared by every builder.

Every record a builder reads ends up either written or rejected with a reason,
so ``read == written + sum(rejected)`` holds for any input and any --on-error.
Input is read as bytes and decoded line by line: a bad byte costs its line, not
the build. JSON is read strictly (no NaN/Infinity, no out-of-range floats, no
lone surrogates), so nothing a builder writes can be invalid JSON or unencodable.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from rewardkit.errors import UserError
from rewardkit.files.jsonl import JsonlError, encodable, lines

OnError = Literal["stop", "skip"]
SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which UTF-8 cannot encode"
SKIP_HINT = "(use --on-error skip to reject such records and go on)"


class BuildError(UserError, ValueError):
    """Unusable input (a file, or a record under ``--on-error stop``); the message names file and line."""


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

    def reject(self, record: Record | str, reason: str, detail: str = "", raw: Any = None) -> None:
        """Count a rejection. ``record`` is the parsed record, or its source when it never parsed;
        then ``raw`` (the line as text) is kept in its place."""
        self.rejected[reason] += 1
        source = record if isinstance(record, str) else record.source
        data = raw if isinstance(record, str) else dict(record.data)
        self.rejects.append({"source": source, "reason": reason, "detail": detail, "record": data})

    def problem(self, record: Record | str, reason: str, detail: str, on_error: OnError, raw: Any = None) -> None:
        """A record not in the builder's format: stop the build (naming file:line), or count it and go on."""
        if on_error == "stop":
            source = record if isinstance(record, str) else record.source
            raise BuildError(f"{source}: {detail} {SKIP_HINT}")
        self.reject(record, reason, detail, raw)

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


# --- JSONL ------------------------------------------------------------------------


def read_records(
    path: str | Path, report: BuildReport, required: Sequence[str], on_error: OnError = "stop"
) -> Iterator[Record]:
    """Yield one Record per non-blank line that is a JSON object with the ``required`` fields;
    any other line stops the build or is rejected as ``malformed`` with its raw text."""
    try:
        for line in lines(path, strict=True):
            report.read += 1
            problem = line.problem
            # Escaped lone surrogates ("\ud800") decode fine but cannot be written back as UTF-8.
            if problem is None and ("\\ud" in line.text or "\\uD" in line.text) and not encodable(line.value):
                problem = SURROGATE
            if problem is None:
                missing = [k for k in required if k not in line.value]
                problem = f"missing field(s) {missing}" if missing else None
            if problem is None:
                yield Record(line.where(path), line.value)
            else:
                report.problem(line.where(path), "malformed", problem, on_error, raw=line.text)
    except JsonlError as exc:
        raise BuildError(f"cannot read input {exc}") from None
    except OSError as exc:
        raise BuildError(f"cannot read input {path}: {exc.strerror or exc}") from None


def write_jsonl(rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
