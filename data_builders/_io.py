"""JSONL reading and build reports shared by every builder.

Every record a builder reads ends up either written or rejected with a reason,
so ``read == written + sum(rejected)`` holds for any input and any --on-error.
Input is read as bytes and decoded line by line: a bad byte costs its line, not
the build. JSON is read strictly (no NaN/Infinity, no out-of-range floats, no
lone surrogates), so nothing a builder writes can be invalid JSON or unencodable.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

OnError = Literal["stop", "skip"]
BOM = "\ufeff"
SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which UTF-8 cannot encode"
SKIP_HINT = "(use --on-error skip to reject such records and go on)"


class BuildError(ValueError):
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


# --- strict JSON ------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and floats that overflow to infinity."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)


def json_problem(text: str) -> tuple[Any, str | None]:
    """(value, None) for strict JSON text, else (None, why not)."""
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    except ValueError as exc:  # NaN/Infinity, or an integer longer than Python's digit limit
        return None, f"not valid JSON ({exc})"
    return value, None


def encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def kind(value: Any) -> str:
    """A JSON value as a user would name it: ``null``, ``a string ('abc')``, ``a list``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({str(value)[:40]})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})" if value else "an empty string"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "an object" if value else "an empty object"
    return type(value).__name__


# --- JSONL ------------------------------------------------------------------------


def read_records(
    path: str | Path, report: BuildReport, required: Sequence[str], on_error: OnError = "stop"
) -> Iterator[Record]:
    """Yield one Record per non-blank line that is a JSON object with the ``required`` fields;
    any other line stops the build or is rejected as ``malformed`` with its raw text."""
    try:
        with Path(path).open("rb") as f:
            for lineno, raw in enumerate(f, 1):
                source = f"{path}:{lineno}"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    report.read += 1
                    detail = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line)"
                    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    report.problem(source, "malformed", detail, on_error, raw=text)
                    continue
                line = line.removeprefix(BOM)  # at the start of a file, or of one cat'ed onto it
                if not line.strip():
                    continue
                report.read += 1
                data, problem = json_problem(line)
                # Escaped lone surrogates ("\ud800") decode fine but cannot be written back as UTF-8.
                if problem is None and ("\\ud" in line or "\\uD" in line) and not encodable(data):
                    problem = SURROGATE
                if problem is None and not isinstance(data, dict):
                    problem = f"a record must be a JSON object, got {kind(data)}"
                if problem is None:
                    missing = [k for k in required if k not in data]
                    problem = f"missing field(s) {missing}" if missing else None
                if problem is None:
                    yield Record(source, data)
                else:
                    report.problem(source, "malformed", problem, on_error, raw=line.rstrip("\r\n"))
    except OSError as exc:
        raise BuildError(f"cannot read input {path}: {exc.strerror or exc}") from None


def write_jsonl(rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
