"""Dataset rows validated eagerly, once per distinct row.

A dataset bug must surface on the first batch that holds the row, whatever the
model wrote: each reward validates every row's gold and columns before looking
at a completion. Results are cached by the row's cells (never by the
completion), so a row seen again, in any batch or by another reward, costs one
dictionary lookup. Failures are not cached: each batch names its own row index.
What outlives a batch is bounded in bytes (``RowCache``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from rewardkit.files.cache import MISS, SMALL_BUDGET, ByteLRU
from rewardkit.rewards._parsing import GoldError, Plan, read_gold, where
from rewardkit.rewards._schema import AnswerSchema
from rewardkit.rewards._text import ExpertIndex, expert_index

T = TypeVar("T")
MISSING: Any = object()  # the batch has no such column (unlike a cell that holds null)


class RowCache:
    """A thread-safe LRU map from a row's cells to what validating them returned, bounded in bytes and entries.

    ``budget`` (bytes) defaults to a quarter of ``$REWARDKIT_CACHE_MB`` (see :mod:`rewardkit.files.cache`); keys
    are the rows' canonical JSON, so a row with long cells costs what it weighs.
    """

    def __init__(self, maxsize: int = 16384, budget: int = SMALL_BUDGET) -> None:
        self.store = ByteLRU(budget, maxsize=maxsize)
        self.validations = 0  # rows actually validated (cache misses); tests count these
        self._values = self.store._entries  # read-only view for tests: the entries, least recently used first
        self._lock = threading.Lock()

    @property
    def maxsize(self) -> int | None:
        return self.store.maxsize

    def get(self, key: Hashable | None, validate: Callable[[], T]) -> T:
        """The cached result for ``key``, else ``validate()`` (cached when it returns; ``key`` None: never)."""
        if key is not None:
            found = self.store.lookup(key)
            if found is not MISS:
                return found  # type: ignore[no-any-return]
        with self._lock:
            self.validations += 1
        value = validate()
        if key is not None:
            self.store.store(key, value)
        return value

    def clear(self) -> None:
        self.store.clear()
        with self._lock:
            self.validations = 0


def _array_cell(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy and pyarrow cells
        return value.tolist()
    raise TypeError(type(value).__name__)


def cells_key(*cells: Any) -> str | None:
    """The cells as canonical JSON, the cache key of a row; None (do not cache) when they are not JSON."""
    try:
        return json.dumps(cells, sort_keys=True, ensure_ascii=False, default=_array_cell)
    except (TypeError, ValueError, RecursionError):
        return None


def expert_names(cell: Any, row: int | None = None) -> list[str]:
    """An ``experts`` cell as a list of names; JSON-encoded lists are accepted."""
    at = where("experts", row)
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except (ValueError, RecursionError) as exc:
            raise GoldError(f"{at}: must be a list of expert names; got {cell[:80]!r}; fix the dataset row") from exc
    if not isinstance(cell, (list, tuple)) or not all(isinstance(x, str) for x in cell):
        raise GoldError(f"{at}: must be a list of expert names; got {cell!r:.80}; fix the dataset row")
    return list(cell)


PLANNING_ROWS = RowCache()


def _check_planning_row(solution: Any, experts: Any, schema: AnswerSchema, threshold: float, row: int) -> Plan | None:
    gold = read_gold(solution, schema, row)
    if gold is None or gold.steps is None or experts is MISSING:
        return gold
    index = expert_index(tuple(expert_names(experts, row)), threshold)
    steps = []
    for i, step in enumerate(gold.steps):
        name = index.resolve(step.expert)
        if name is None:
            raise GoldError(
                f"{where('solution', row)}: step {i}: gold expert {step.expert!r} is not in the row's 'experts' list "
                f"{index.experts}; fix the dataset row (its solution or its experts column)"
            )
        steps.append(step._replace(expert=name))
    # Resolved here, once per row: the rewards read the gold's experts as the row's own names.
    return gold._replace(steps=tuple(steps))


def planning_gold(solution: Any, experts: Any, schema: AnswerSchema, threshold: float, row: int) -> Plan | None:
    """The row's gold plan, validated with its ``experts`` cell (``MISSING``: no such column in the batch).

    With the cell, each gold step's expert is the row's own spelling of it (the resolved name).
    """
    return PLANNING_ROWS.get(
        _planning_key(solution, experts, schema, threshold),
        lambda: _check_planning_row(solution, experts, schema, threshold, row),
    )


def _planning_key(solution: Any, experts: Any, schema: AnswerSchema, threshold: float) -> Hashable | None:
    """A planning row's cache key. The usual cells (a string solution, a list of names) key as themselves, without
    encoding every row of every batch as JSON; any other cells by their canonical JSON (one item fewer: no clash)."""
    if type(solution) is str and type(experts) is list and all(type(e) is str for e in experts):
        return (schema, threshold, "cells", solution, *experts)
    cells = cells_key(solution, None if experts is MISSING else experts, experts is MISSING)
    return None if cells is None else (schema, threshold, cells)


@dataclasses.dataclass(frozen=True)
class PlanningRows:
    """A batch's rows checked: each row's gold, and its ``experts`` list indexed where the gold has steps (None
    where it has none, or the batch has no such column)."""

    golds: list[Plan | None]
    indexes: list[ExpertIndex | None]

    def score_plans(
        self, plans: Sequence[Plan | None], score: Callable[[Plan | None, Plan, ExpertIndex], float]
    ) -> list[float | None]:
        """``score(plan, gold, index)`` for each row with a gold plan (an index exists exactly where the gold has
        steps), None for the others. ``score`` reads a plan's steps only, and gives no plan and a plan without
        steps the same score: the rollouts that planned alike, whatever their rewrites, are scored once a batch.
        The golds and indexes outlive the call, so their ids stay theirs."""
        rewards: list[float | None] = []
        scored: dict[tuple[Any, int, int], float] = {}  # (steps, gold, experts list) -> the score
        for plan, gold, index in zip(plans, self.golds, self.indexes, strict=True):
            if gold is None or index is None:
                rewards.append(None)
                continue
            key = (None if plan is None else plan.steps, id(gold), id(index))
            if key not in scored:
                scored[key] = score(plan, gold, index)
            rewards.append(scored[key])
        return rewards


def planning_rows(
    solutions: Sequence[Any], experts: Sequence[Any] | None, schema: AnswerSchema, threshold: float
) -> PlanningRows:
    """Every row of a batch through :func:`planning_gold`, kept for the batch (the rewards after the first make one
    lookup, not one a row). The lists are shared: never change them."""
    key = _batch_key(solutions, experts, schema, threshold)
    found = MISS if key is None else PLANNING_ROWS.store.lookup(key, "batch")
    if found is not MISS:
        return found  # type: ignore[no-any-return]
    cells = [MISSING] * len(solutions) if experts is None else experts
    golds = [planning_gold(s, e, schema, threshold, i) for i, (s, e) in enumerate(zip(solutions, cells, strict=True))]
    indexes = [_index(g, e, threshold, i) for i, (g, e) in enumerate(zip(golds, cells, strict=True))]
    rows = PlanningRows(golds, indexes)
    if key is not None:  # the key holds the cells; the value, references to what the row entries hold
        PLANNING_ROWS.store.store(key, rows, "batch", cost=sys.getsizeof(golds) + sys.getsizeof(indexes))
    return rows


def _index(gold: Plan | None, experts: Any, threshold: float, row: int) -> ExpertIndex | None:
    if gold is None or gold.steps is None or experts is MISSING:
        return None
    return expert_index(tuple(expert_names(experts, row)), threshold)


def _batch_key(
    solutions: Sequence[Any], experts: Sequence[Any] | None, schema: AnswerSchema, threshold: float
) -> Hashable | None:
    """The usual batch (string solutions, lists of names) as one flat tuple of its cells, each list after its
    length; None (not kept) for any other."""
    if not all(type(s) is str for s in solutions):
        return None
    key: list[Any] = [schema, threshold, "batch", experts is None, *solutions]
    for names in () if experts is None else experts:
        if type(names) is not list or not all(type(e) is str for e in names):
            return None
        key += (len(names), *names)
    return tuple(key)
