"""The planning input records, checked field by field before a builder reads them.

A field of the wrong type is a record-level problem, ``bad_field:<name>``, with a
detail that names the field, the expected shape and what was found. ``null`` for
an optional field means "not given". The gold fields (``rewrite``/``plan`` of an
annotated record) are judged separately, as ``gold_invalid``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.files.jsonl import kind
from rewardkit.rewards.answers import AnswerSchema

# A check returns None when the value is fine, else what is wrong with it ("got null", "but item 2 is null").
Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Field:
    name: str
    expected: str
    check: Check
    optional: bool = False


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _text(value: Any) -> str | None:
    return None if _is_text(value) else f"got {kind(value)}"


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"got {kind(value)}"


def _ident(value: Any) -> str | None:
    ok = isinstance(value, str | int) and not isinstance(value, bool)
    return None if ok else f"got {kind(value)}"


def _texts(*, nonempty: bool) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"got {kind(value)}"
        if nonempty and not value:
            return "got an empty list"
        bad = next((i for i, item in enumerate(value) if not _is_text(item)), None)
        return None if bad is None else f"but item {bad} is {kind(value[bad])}"

    return check


def _history(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"got {kind(value)}"
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            return f"but item {i} is {kind(message)}"
        if not _is_text(message.get("role")):
            return f"but item {i} has role {kind(message.get('role'))}"
        if not isinstance(message.get("content"), str):
            return f"but item {i} has content {kind(message.get('content'))}"
    return None


COMMON: tuple[Field, ...] = (
    Field("query", "a non-empty string", _text),
    Field("experts", "a non-empty list of non-empty strings", _texts(nonempty=True)),
    Field("history", "a list of {role, content} objects with string values", _history, optional=True),
    Field("tools", "a list of non-empty strings", _texts(nonempty=False), optional=True),
    Field("products", "a list of non-empty strings", _texts(nonempty=False), optional=True),
    Field("id", "a string or an integer", _ident, optional=True),
)
SFT: tuple[Field, ...] = (*COMMON, Field("output", "a string", _string))
GRPO: tuple[Field, ...] = COMMON


def field_problem(data: Mapping[str, Any], fields: Sequence[Field]) -> tuple[str, str] | None:
    """(reason, detail) for the first field of the wrong shape, or None when all are fine."""
    for f in fields:
        if f.name not in data or (f.optional and data[f.name] is None):
            continue  # a missing required field was already rejected by read_records
        wrong = f.check(data[f.name])
        if wrong:
            return f"bad_field:{f.name}", f"{f.name} must be {f.expected}, {wrong}"
    return None


def _steps(value: Any, what: str, expert_keys: Sequence[str]) -> str | None:
    """Why ``value`` is not a list of step objects with string experts, or None."""
    if not isinstance(value, list):
        return f"{what} must be a list of step objects, got {kind(value)}"
    for i, step in enumerate(value):
        if not isinstance(step, dict):
            return f"{what} must be a list of step objects, but item {i} is {kind(step)}"
        expert = next((step[k] for k in expert_keys if k in step), "")
        if not isinstance(expert, str):
            return f"{what} step {i} must name its expert as a string, got {kind(expert)}"
    return None


def sft_gold_problem(gold: Any, schema: AnswerSchema) -> str | None:
    """Why an SFT record's optional ``gold`` cannot be compared with the teacher's plan, or None."""
    if not isinstance(gold, dict):
        return f"gold must be an object with a plan (a list of step objects), got {kind(gold)}"
    plan = gold.get(schema.plan_key) or gold.get("plan") or []
    return _steps(plan, "gold plan", (schema.expert_key, "专家"))


def grpo_gold_problem(data: Mapping[str, Any], schema: AnswerSchema) -> str | None:
    """Why an annotated record's ``rewrite``/``plan`` cannot even be put in the answer format, or None."""
    if not isinstance(data["rewrite"], str):
        return f"rewrite must be a string, got {kind(data['rewrite'])}"
    return _steps(data["plan"], "plan", ("专家", schema.expert_key))
