"""Parse ``<think>…</think>\\n\\n<answer>{JSON}</answer>`` completions once per batch.

The seven rewards read the same completions. ``parse`` and ``read_plan`` are
LRU-cached on the completion string, so a batch is split and JSON-decoded once
no matter how many rewards look at it (lru_cache is thread-safe in CPython).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rewardkit.rewards._schema import DEPENDS_ON, AnswerSchema

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
_CACHE_SIZE = 16384


@dataclass(frozen=True)
class Completion:
    """Where the pieces of a completion are.

    ``think`` is the stripped text of the first closed think block (None when
    there is none). ``data`` is the single answer block after it decoded as a
    JSON object (None when there are zero or several blocks, or it is not one).
    """

    think: str | None
    data: Mapping[str, Any] | None


@dataclass(frozen=True)
class Step:
    expert: str
    tasks: tuple[str, ...]
    depends_on: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    rewrite: str | None
    steps: tuple[Step, ...] | None


def _json_object(text: str) -> Mapping[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        # Invalid JSON, a >4300-digit integer, or nesting deeper than the C
        # decoder's recursion limit: all mean "not a valid answer".
        return None
    return value if isinstance(value, dict) else None


@lru_cache(maxsize=_CACHE_SIZE)
def parse(text: str) -> Completion:
    """Split ``text`` into think and answer; never raises on a string."""
    think: str | None = None
    region = text
    start = text.find(THINK_OPEN)
    if start >= 0:
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        if end < 0:
            # An unclosed think swallows the rest: nothing after it is an answer.
            return Completion(None, None)
        think = text[start + len(THINK_OPEN) : end].strip()
        region = text[end + len(THINK_CLOSE) :]
    a_start = region.find(ANSWER_OPEN)
    a_end = region.find(ANSWER_CLOSE)
    if region.count(ANSWER_OPEN) != 1 or region.count(ANSWER_CLOSE) != 1 or a_end < a_start:
        return Completion(think, None)
    return Completion(think, _json_object(region[a_start + len(ANSWER_OPEN) : a_end]))


def _steps(raw: Any, schema: AnswerSchema) -> tuple[Step, ...]:
    steps = []
    for item in raw:
        tasks = item.get(schema.tasks_key, [])
        steps.append(
            Step(
                expert=str(item.get(schema.expert_key, "")),
                tasks=tuple(str(t) for t in tasks) if isinstance(tasks, list) else (str(tasks),),
                depends_on=tuple(int(d) for d in item.get(DEPENDS_ON, []) if isinstance(d, int)),
            )
        )
    return tuple(steps)


def _dag_ok(steps: tuple[Step, ...]) -> bool:
    # depends_on may only point at earlier steps, which also rules out cycles.
    return all(0 <= d < i for i, step in enumerate(steps) for d in step.depends_on)


@lru_cache(maxsize=_CACHE_SIZE)
def read_plan(text: str, schema: AnswerSchema) -> Plan | None:
    """The completion's plan if its answer validates against ``schema``, else None."""
    data = parse(text).data
    if data is None or not schema.is_valid(data):
        return None
    steps = _steps(data[schema.plan_key], schema)
    if not _dag_ok(steps):
        return None
    return Plan(rewrite=data[schema.rewrite_key], steps=steps)


class GoldError(ValueError):
    """A dataset row's ``solution`` is not the JSON object the rewards expect."""


def read_gold(solution: Any, schema: AnswerSchema) -> Plan | None:
    """Parse a ``solution`` cell; None when the row has no gold at all.

    Gold is dataset content, so a malformed cell raises instead of silently
    scoring every completion against nothing.
    """
    if solution is None or (isinstance(solution, str) and not solution.strip()):
        return None
    data = solution if isinstance(solution, Mapping) else _json_object(str(solution))
    if data is None:
        raise GoldError(
            f"column 'solution' must hold the gold answer as a JSON object string in schema "
            f"{schema.name!r}; got {str(solution)[:80]!r}"
        )
    rewrite = data.get(schema.rewrite_key)
    raw_steps = data.get(schema.plan_key)
    if raw_steps is not None and not (isinstance(raw_steps, list) and all(isinstance(s, Mapping) for s in raw_steps)):
        raise GoldError(f"column 'solution': {schema.plan_key!r} must be a list of step objects")
    return Plan(
        rewrite=rewrite if isinstance(rewrite, str) and rewrite.strip() else None,
        steps=_steps(raw_steps, schema) if raw_steps is not None else None,
    )
