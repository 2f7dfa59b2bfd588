"""Episode records read back from a file are checked field by field before anything trusts them.

One checker for both readers: ``EpisodeLog`` (``synth``/``eval --resume``), which needs every field a run
writes, and ``tables.read_run`` (``eval compare``), which needs only what the metrics use. A record that
fails names its field, what it holds and what it should hold; the caller adds ``file:line``.

What a field must be (``None`` allowed only where written):

- ``run``: a non-empty string (the log only); ``task_id``: a non-empty string (or an integer, outside the log);
  ``trial``: an integer >= 0; ``status``: ``ok`` or ``infra_error``;
- ``reward``: a finite number in [0, 1], ``None`` only for ``infra_error``; ``tcr``: the same, or ``None``;
- ``turns``, ``tool_calls``, ``tool_errors``: integers from 0 to 2^53 (or ``None``); ``tools``, ``call_codes``,
  ``gates`` (optional): objects of such integers; ``termination``: a non-empty string; ``error``, ``state_hash``:
  a string or ``None``; ``messages``: a list of objects, each with a string ``role``; ``user_flags`` (optional):
  a list of objects, each with a string ``kind``; ``checks`` (optional): a list of objects, each a string ``check``
  and a boolean ``passed``, or ``None``; ``diff`` (optional): a list of objects, each with string ``table``, ``row``
  and ``field``, or ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rewardkit.files.jsonl import kind

STATUSES = ("ok", "infra_error")
MAX_COUNT = 2**53  # counts above this are not a run's, and their means would lose precision or overflow
# Fields an episode log written by this version always holds (``Scorer.record``).
LOG_FIELDS = (
    "run",
    "task_id",
    "trial",
    "status",
    "reward",
    "tcr",
    "termination",
    "turns",
    "tool_calls",
    "tool_errors",
    "tools",
    "call_codes",
    "error",
    "state_hash",
    "messages",
)


def is_number(value: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_count(value: Any) -> bool:
    """An integer from 0 to ``MAX_COUNT`` (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _unit(value: Any) -> bool:
    return is_number(value) and 0 <= value <= 1


def is_counts(value: Any) -> bool:
    """An object of such counts."""
    return isinstance(value, dict) and all(isinstance(k, str) and is_count(v) for k, v in value.items())


def _messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)


def _flags(value: Any) -> bool:  # optional: logs written before the user review lack it
    return isinstance(value, list) and all(isinstance(f, dict) and isinstance(f.get("kind"), str) for f in value)


def _checks(value: Any) -> bool:  # optional, as the diff: logs written before the viewer read them lack both
    return isinstance(value, list) and all(
        isinstance(c, dict) and isinstance(c.get("check"), str) and isinstance(c.get("passed"), bool) for c in value
    )


def _diff(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(d, dict) and all(isinstance(d.get(k), str) for k in ("table", "row", "field")) for d in value
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


# field -> (check, what it should be); None passes where the field may be null.
_CHECKS: dict[str, tuple[Any, str, bool]] = {
    "run": (_text, "a non-empty string", False),
    "trial": (is_count, "an integer from 0 to 2^53", False),
    "tcr": (_unit, "a number in [0, 1] or null", True),
    "termination": (_text, "a non-empty string", False),
    "turns": (is_count, "an integer from 0 to 2^53, or null", True),
    "tool_calls": (is_count, "an integer from 0 to 2^53, or null", True),
    "tool_errors": (is_count, "an integer from 0 to 2^53, or null", True),
    "tools": (is_counts, "an object of integer counts from 0 to 2^53", True),
    "call_codes": (is_counts, "an object of integer counts from 0 to 2^53", True),
    "gates": (is_counts, "an object of integer counts from 0 to 2^53", True),  # optional: logs before gates lack it
    "user_flags": (_flags, "a list of the user review's flags, each an object with a string 'kind'", False),
    "error": (lambda v: isinstance(v, str), "a string or null", True),
    "state_hash": (lambda v: isinstance(v, str), "a string or null", True),
    "checks": (_checks, "a list of checks, each an object with a string 'check' and a boolean 'passed'", True),
    "diff": (_diff, "a list of differences, each an object with string 'table', 'row' and 'field'", True),
    "messages": (_messages, "a list of messages, each an object with a string 'role'", False),
    "closing": (lambda v: isinstance(v, str), "a string or null", True),  # optional: older logs lack it
}


def record_problem(record: Mapping[str, Any], log: bool) -> str | None:
    """Why ``record`` is not a usable episode record, or None. ``log``: every field a run writes is required
    (an episode log being resumed); else only ``task_id``, ``trial``, ``status`` and an ok episode's ``reward``."""
    if log:
        missing = [name for name in LOG_FIELDS if name not in record]
        if missing:
            return f"no {', '.join(repr(m) for m in missing)} field"
    task_id = record.get("task_id")
    if not (_text(task_id) or (not log and isinstance(task_id, int) and not isinstance(task_id, bool))):
        return f"'task_id' must be a non-empty string, got {kind(task_id)}"
    if "trial" not in record:
        return "an episode record needs 'task_id' and an integer 'trial'"
    status = record.get("status")
    if status not in STATUSES:
        return f"'status' must be one of {', '.join(STATUSES)}, got {kind(status)}"
    reward = record.get("reward")
    if status == "ok" and not _unit(reward):
        return f"an ok episode needs a numeric 'reward' in [0, 1], got {kind(reward)}"
    if status != "ok" and reward is not None and not _unit(reward):
        return f"'reward' must be a number in [0, 1] or null, got {kind(reward)}"
    for name, (check, want, nullable) in _CHECKS.items():
        if name not in record:
            continue  # required ones were checked above (log); the others are optional
        value = record[name]
        if not ((nullable and value is None) or check(value)):
            return f"'{name}' must be {want}, got {kind(value)}"
    return None
