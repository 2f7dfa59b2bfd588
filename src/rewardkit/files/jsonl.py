"""The one JSONL reader, a file's lines as JSON objects, each problem named with ``file:line``; and the one JSON
writer, :func:`dumps`, whose text always encodes as UTF-8.

Lines are split on ``\\n`` only (bytes), as JSONL defines them: a stray ``\\r`` or U+2028 stays inside
its line. A leading BOM is dropped (at the start of a file, or of one concatenated onto it); blank
lines are skipped. :func:`lines` yields every non-blank line with its value or its problem, for callers
that count bad lines (the builders); :func:`read_jsonl` raises on the first one; :func:`read_rows` also on a
missing file and on one without rows (every command's ``--data``-style input).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.errors import UserError

BOM = "\ufeff"


class JsonlError(UserError, ValueError):
    """A JSONL input is not one JSON object per line; the message names ``file:line``."""


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


def json_problem(text: str, strict: bool = True) -> tuple[Any, str | None]:
    """(value, None) for JSON text (strict: no NaN/Infinity), else (None, why not)."""
    try:
        value = loads_strict(text) if strict else json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    except ValueError as exc:  # NaN/Infinity, or an integer longer than Python's digit limit
        return None, f"not valid JSON ({exc})"
    return value, None


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the file
    text: str  # the line, decoded (bad bytes replaced), without its line break
    value: Any  # the JSON object, or None when there is a problem
    problem: str | None

    def where(self, path: str | Path) -> str:
        return f"{path}:{self.number}"


def lines(path: str | Path, strict: bool = True) -> Iterator[Line]:
    """Every non-blank line of ``path``: its object, or why it is not one (UTF-8, JSON, an object)."""
    path = Path(path)
    if path.is_dir():
        raise JsonlError(f"{path} is a directory, not a JSONL file")
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                shown = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                why = f"not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
                yield Line(number, shown, None, why)
                continue
            text = text.removeprefix(BOM)
            if not text.strip():
                continue
            value, problem = json_problem(text, strict)
            if problem is None and not isinstance(value, dict):
                value, problem = None, f"expected a JSON object per line, got {kind(value)}"
            yield Line(number, text.rstrip("\r\n"), value, problem)


def read_jsonl(path: str | Path, required: Sequence[str] = (), strict: bool = False) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; the first bad line raises :class:`JsonlError` naming ``file:line``.

    ``required`` columns are checked per row.
    """
    rows = []
    for line in lines(path, strict):
        if line.problem is not None:
            raise JsonlError(f"{line.where(path)}: {line.problem}")
        missing = [k for k in required if k not in line.value]
        if missing:
            raise JsonlError(f"{line.where(path)}: no {missing[0]!r} column (rows need {', '.join(required)})")
        rows.append(line.value)
    return rows


def read_rows(path: str | Path, flag: str = "", required: Sequence[str] = ()) -> list[dict[str, Any]]:
    """:func:`read_jsonl` of an input that must hold rows, strict JSON (``NaN``, ``Infinity`` and numbers that
    overflow to infinity are refused: they are not JSON): a missing file and a file without a row (empty, or only
    blank lines) raise :class:`JsonlError` too, naming the input as ``flag path`` (``--data rows.jsonl``)."""
    path = Path(path)
    name = f"{flag} {path}" if flag else str(path)
    if not path.exists():
        raise JsonlError(f"{name} not found")
    rows = read_jsonl(path, required, strict=True)
    if not rows:
        why = "the file is empty" if path.stat().st_size == 0 else "only blank lines"
        raise JsonlError(f"{name}: no rows ({why})")
    return rows


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, **options: Any) -> str:
    r"""``json.dumps(value, ensure_ascii=False, **options)`` that always encodes as UTF-8: a lone surrogate (what
    ``json.loads`` makes of a model's ``"\ud800"``) is written as its escape, as ``ensure_ascii`` writes it, so the
    text reads back as the same string. The one JSON writer of runs (the episode log, reports, SFT rows, generated
    tasks, request bodies): a model's text cannot make a write fail.

    >>> lone = chr(0xD800)
    >>> print(dumps({"said": "café " + lone}))
    {"said": "café \ud800"}
    >>> json.loads(dumps(lone)) == lone
    True
    """
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")  # the common case, and a fraction of the search's cost
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return text


def encodable(value: Any) -> bool:
    """Whether ``value`` can be written as UTF-8 JSON (escaped lone surrogates decode, but cannot be written)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
