"""Parse ``<think>…</think>\\n\\n<answer>{JSON}</answer>`` completions once per batch.

The seven rewards read the same completions. ``parse`` and ``read_plan`` are
cached on the completion string in :data:`COMPLETIONS`, so a batch is split and
JSON-decoded once no matter how many rewards look at it; ``parse_all`` and
``read_plans`` also keep the whole batch's list under the batch, so the rewards after
the first make one lookup a batch, not one a completion. The cache is a
thread-safe LRU bounded in bytes (``$REWARDKIT_CACHE_MB``, default 64 MiB, see
:mod:`rewardkit.files.cache`): it counts each completion's text once, plus its parse and its plan
per schema, so long multi-turn transcripts cannot pile up between batches.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rewardkit.errors import UserError
from rewardkit.files.cache import BUDGET, MISS, ByteLRU
from rewardkit.files.sizes import approx_size, decoded_json_size
from rewardkit.rewards._schema import DEPENDS_ON, AnswerSchema

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
COMPLETIONS = ByteLRU(BUDGET)  # completion text -> its parse and its plan per schema


# Named tuples, not frozen dataclasses: a batch builds thousands, and a tuple is built and hashed in C.
class Completion(NamedTuple):
    """Where the pieces of a completion are.

    ``think`` is the stripped text of the first closed think block (None when
    there is none). ``data`` is the single answer block after it decoded as a
    JSON object (None when there are zero or several blocks, or it is not one);
    ``answer`` is that block's text, exactly when ``data`` is not None.
    """

    think: str | None
    data: Mapping[str, Any] | None
    answer: str | None = None


class Step(NamedTuple):
    expert: str
    tasks: tuple[str, ...]
    depends_on: tuple[int, ...]


class Plan(NamedTuple):
    rewrite: str | None
    steps: tuple[Step, ...] | None


# What each tuple costs beside the texts and tuples it holds (the deep walk of an empty one).
_COMPLETION_BYTES = approx_size(Completion(None, None))
_STEP_BYTES = approx_size(Step("", (), ()))
_PLAN_BYTES = approx_size(Plan(None, None))


def _json_object(text: str) -> Mapping[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        # Invalid JSON, a >4300-digit integer, or nesting deeper than the C
        # decoder's recursion limit: all mean "not a valid answer".
        return None
    return value if isinstance(value, dict) else None


def _completion_cost(found: Completion) -> int:
    """A parse's bytes, no fewer than the deep walk counts: the object, its two texts and the decoded answer's bound."""
    getsizeof = sys.getsizeof
    answer = found.answer
    decoded = 0 if answer is None else decoded_json_size(answer)
    return _COMPLETION_BYTES + getsizeof(found.think) + getsizeof(answer) + decoded


@COMPLETIONS.memoize(cost=_completion_cost)
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
    answer = region[a_start + len(ANSWER_OPEN) : a_end]
    data = _json_object(answer)
    return Completion(think, data, answer if data is not None else None)


def _steps(raw: Any, schema: AnswerSchema) -> tuple[Step, ...]:
    steps = []
    for item in raw:
        tasks = item.get(schema.tasks_key, [])
        steps.append(
            Step(
                str(item.get(schema.expert_key, "")),
                tuple(map(str, tasks)) if isinstance(tasks, list) else (str(tasks),),
                tuple(int(d) for d in item.get(DEPENDS_ON, ()) if isinstance(d, int)),
            )
        )
    return tuple(steps)


def _dag_ok(steps: tuple[Step, ...]) -> bool:
    # depends_on may only point at earlier steps, which also rules out cycles.
    return all(0 <= d < i for i, step in enumerate(steps) for d in step.depends_on)


def read_plan(text: str, schema: AnswerSchema) -> Plan | None:
    """The completion's plan if its answer validates against ``schema``, else None."""
    found = parse(text)
    data = found.data  # the answer as parse decoded it (None: no answer object): not decoded again
    if found.answer is None or data is None:
        return None
    return answer_plan.compute_with(lambda: _plan(data, schema), found.answer, schema)


def _plan_cost(plan: Plan | None) -> int:
    """A plan's bytes, no fewer than the deep walk counts (each string counted, even one the answer's parse holds)."""
    if plan is None:
        return sys.getsizeof(None)
    getsizeof = sys.getsizeof
    total = _PLAN_BYTES + getsizeof(plan.rewrite) + getsizeof(plan.steps)
    for step in plan.steps or ():
        total += _STEP_BYTES + getsizeof(step.expert) + getsizeof(step.tasks) + getsizeof(step.depends_on)
        total += sum(map(getsizeof, step.tasks)) + sum(map(getsizeof, step.depends_on))
    return total


@COMPLETIONS.memoize(cost=_plan_cost)
def answer_plan(answer: str, schema: AnswerSchema) -> Plan | None:
    """The plan of an answer block's text (a JSON object, as ``parse`` found it) if it validates, else None."""
    data = _json_object(answer)
    return None if data is None else _plan(data, schema)


def _plan(data: Mapping[str, Any], schema: AnswerSchema) -> Plan | None:
    if not schema.is_valid(data):
        return None
    # A custom schema may leave the fields optional or loosely typed: never index blindly.
    raw_steps = data.get(schema.plan_key)
    if raw_steps is not None and not (isinstance(raw_steps, list) and all(isinstance(s, Mapping) for s in raw_steps)):
        return None
    steps = _steps(raw_steps, schema) if raw_steps is not None else None
    if steps is not None and not _dag_ok(steps):
        return None
    rewrite = data.get(schema.rewrite_key)
    return Plan(rewrite=rewrite if isinstance(rewrite, str) else None, steps=steps)


def parse_all(texts: Sequence[str]) -> list[Completion]:
    """``[parse(t) for t in texts]``, kept for the batch: the list is shared, never change it."""
    return _batch(tuple(texts), "parse_all", lambda: [parse(t) for t in texts])


def read_plans(texts: Sequence[str], schema: AnswerSchema) -> list[Plan | None]:
    """``[read_plan(t, schema) for t in texts]``, kept for the batch: the list is shared, never change it."""
    return _batch(tuple(texts), ("read_plans", schema), lambda: [read_plan(t, schema) for t in texts])


def _batch(key: tuple[str, ...], slot: Any, compute: Any) -> Any:
    # The entry costs its key's strings (counted again beside each completion's own entry) and the list of
    # references; a batch too large for the cache's share is recomputed from the completions' own entries.
    found = COMPLETIONS.lookup(key, slot)
    if found is MISS:
        found = compute()
        COMPLETIONS.store(key, found, slot, cost=sys.getsizeof(found))
    return found


class DatasetError(UserError, ValueError):
    """A dataset cell is unusable: a bug in the data, not the model's doing. The message names column and row."""


class GoldError(DatasetError):
    """A dataset row's ``solution`` is not the JSON object the rewards expect."""


_FIX = "; fix the dataset row"


def where(column: str, row: int | None) -> str:
    """``column 'solution' row 3``: how every dataset error starts (row = position in the batch)."""
    return f"column {column!r}" + ("" if row is None else f" row {row}")


def _gold_steps(raw: list[Mapping[str, Any]], schema: AnswerSchema, at: str) -> tuple[Step, ...]:
    steps = []
    for i, item in enumerate(raw):
        expert, tasks, deps = item.get(schema.expert_key), item.get(schema.tasks_key, []), item.get(DEPENDS_ON)
        if not isinstance(expert, str) or not expert.strip():
            raise GoldError(f"{at}: step {i} needs a non-empty string {schema.expert_key!r}; got {expert!r:.80}{_FIX}")
        if isinstance(tasks, str):
            tasks = [tasks]
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            raise GoldError(f"{at}: step {i}: {schema.tasks_key!r} must be a list of strings; got {tasks!r:.80}{_FIX}")
        deps = [] if deps is None else deps
        if not isinstance(deps, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in deps):
            raise GoldError(f"{at}: step {i}: {DEPENDS_ON!r} must be a list of step indices; got {deps!r:.80}{_FIX}")
        bad = [d for d in deps if not 0 <= d < i]
        if bad:
            allowed = f"earlier steps (0..{i - 1})" if i else "no step (it is the first)"
            raise GoldError(
                f"{at}: step {i}: {DEPENDS_ON!r} {bad} must point at {allowed}; "
                f"a step can only depend on steps before it{_FIX}"
            )
        steps.append(Step(expert, tuple(tasks), tuple(deps)))
    return tuple(steps)


def read_gold(solution: Any, schema: AnswerSchema, row: int | None = None) -> Plan | None:
    """Parse a ``solution`` cell; None when the row has no gold at all.

    Gold is dataset content, so a malformed cell raises instead of silently
    scoring every completion against nothing (or against a half-read plan).
    """
    if solution is None or (isinstance(solution, str) and not solution.strip()):
        return None
    at = where("solution", row)
    data = solution if isinstance(solution, Mapping) else _json_object(str(solution))
    if data is None:
        raise GoldError(
            f"{at}: must hold the gold answer as a JSON object string in schema {schema.name!r}; "
            f"got {str(solution)[:80]!r}{_FIX}"
        )
    rewrite = data.get(schema.rewrite_key)
    if rewrite is not None and not isinstance(rewrite, str):
        raise GoldError(f"{at}: the gold {schema.rewrite_key!r} must be a string or null; got {rewrite!r:.80}{_FIX}")
    raw_steps = data.get(schema.plan_key)
    if raw_steps is not None and not (isinstance(raw_steps, list) and all(isinstance(s, Mapping) for s in raw_steps)):
        raise GoldError(f"{at}: {schema.plan_key!r} must be a list of step objects; got {raw_steps!r:.80}{_FIX}")
    return Plan(
        rewrite=rewrite if isinstance(rewrite, str) and rewrite.strip() else None,
        steps=_gold_steps(raw_steps, schema, at) if raw_steps is not None else None,
    )
