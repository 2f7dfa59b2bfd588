"""The generic checks: what every reward keeps whatever it scores.

Each check takes the :class:`Context` (the reward, the rows, what the reward declares, and the batch's
scores, computed once) and returns a :class:`Check`. A failure names the first row, column or call that
shows it, so the message points at the smallest input found.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.testing.calling import TRAINER_STATE, Declared, call, columns_of, names_prompts, takes
from rewardkit.testing.hostile import describe
from rewardkit.testing.probes import said
from rewardkit.testing.report import Check

TOLERANCE = 1e-6  # two scores are "the same" within this (batched float32 maths may differ in the last bits)
DRAWS = 4096  # scores the determinism check draws in all: a per-score flip rate p is missed with (1 - p) ** DRAWS
EXTRA = {"completion_ids": [1, 2, 3], "rewardkit_extra_column": "unused"}  # per-row extra columns


def short(value: Any, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_UNSET = object()  # the batch not scored yet (None is what a broken reward may return)


@dataclass
class Context:
    reward: Callable[..., Any]
    rows: list[dict[str, Any]]
    declared: Declared
    margin: float = 0.1
    time_limit_s: float = 2.0
    isolate: bool = True
    draws: int = DRAWS
    _baseline: Any = field(default=_UNSET, repr=False)

    def copied(self, rows: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        rows = self.rows if rows is None else rows
        try:
            return copy.deepcopy([dict(r) for r in rows])
        except Exception:  # cells that cannot be copied: share them
            return [dict(r) for r in rows]

    def run(self, rows: Sequence[Mapping[str, Any]] | None = None, conversational: bool = False, **extra: Any) -> Any:
        rows = self.copied(rows)
        cols = columns_of(rows)
        completions = list(cols.get("completion", [""] * len(rows)))
        if conversational:
            completions = conversational_form(completions)
        return call(self.reward, completions, {**cols, **extra})

    def preset(self, scores: Any) -> None:
        """The batch's scores (or what the call raised), computed elsewhere: :meth:`baseline` returns them."""
        self._baseline = scores

    def baseline(self) -> list[Any]:
        """The batch's scores (raises what the call raised, every time it is asked)."""
        if self._baseline is _UNSET:
            try:
                self._baseline = self.run()
            except Exception as exc:
                self._baseline = exc
        if isinstance(self._baseline, BaseException):
            raise self._baseline
        return self._baseline

    def row(self, i: int) -> str:
        return f"row {i} {short(self.rows[i])}"


def conversational_form(completions: Sequence[Any]) -> list[Any]:
    """Each string completion as TRL's conversational ``[{"role": "assistant", "content": …}]``."""
    return [[said(c)] if isinstance(c, str) else c for c in completions]


def same(a: Any, b: Any) -> bool:
    """Equal scores: both None, both NaN (the ``values`` check reports NaN), or within :data:`TOLERANCE`."""
    if a is None or b is None:
        return a is b
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return a == b
    return x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= TOLERANCE


def short_of_gold(gold: float, probe: float, margin: float | None) -> bool:
    """The probe rule, the one copy that the kit (on each row) and ``lint RECIPE`` (on each row for a near miss and
    ``do_nothing``, else on the means of the weighted sum) apply: a probe scores at least ``margin`` below its gold;
    a near miss (``margin`` None) scores below it, by more than float noise (:data:`TOLERANCE`).

    >>> short_of_gold(1.0, 0.8, 0.1), short_of_gold(1.0, 0.95, 0.1), short_of_gold(1.0, 0.95, None)
    (True, False, True)
    """
    if margin is None:
        return probe < gold - TOLERANCE
    return gold - probe >= margin


def first_difference(got: Any, expected: Sequence[Any]) -> int | None:
    """The first index where ``got`` differs from ``expected`` (the length when one is longer), else None."""
    if not isinstance(got, list | tuple):
        return 0
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        if not same(a, b):
            return i
    return None if len(got) == len(expected) else min(len(got), len(expected))


def shape_problem(scores: Any, n: int) -> str | None:
    if not isinstance(scores, list | tuple):
        return f"returned {type(scores).__name__} {short(scores, 60)}, not a list"
    if len(scores) != n:
        return f"returned {len(scores)} values for {n} completion{'s' if n != 1 else ''}"
    for i, s in enumerate(scores):
        if s is not None and (isinstance(s, bool) or not isinstance(s, float)):
            return f"value {i} is {s!r} ({type(s).__name__}); each must be a float or None"
    return None


def value_problem(scores: Sequence[Any], declared: Declared) -> str | None:
    lo, hi = declared.range
    for i, s in enumerate(scores):
        if s is None:
            if not declared.allow_none:
                return f"value {i} is None, and the reward declares it never returns None (may_return_none = False)"
        elif not math.isfinite(s):
            return f"value {i} is {s!r}; scores must be finite"
        elif not lo <= s <= hi:
            return f"value {i} is {s!r}, outside the declared range [{lo}, {hi}]"
    return None


def first_row_alone(ctx: Context, problem: Callable[[Any], str | None]) -> str:
    """Where a batch's problem shows on a single row: the first such row, or the whole batch."""
    for i in range(len(ctx.rows)):
        try:
            found = problem(ctx.run([ctx.rows[i]]))
        except Exception as exc:
            return f"smallest failing input: {ctx.row(i)} alone, which raises {describe(exc)}"
        if found:
            return f"smallest failing input: {ctx.row(i)} alone ({found})"
    return "no row alone shows it, only the whole batch"


def check_shape(ctx: Context) -> Check:
    try:
        scores = ctx.baseline()
    except Exception as exc:
        return Check("shape", False, f"raised {describe(exc)}; {first_row_alone(ctx, lambda s: None)}")
    problem = shape_problem(scores, len(ctx.rows))
    if problem is None:
        return Check("shape", True, f"{len(ctx.rows)} floats or None for {len(ctx.rows)} rows")
    return Check("shape", False, f"{problem}; {first_row_alone(ctx, lambda s: shape_problem(s, 1))}")


def check_values(ctx: Context) -> Check:
    lo, hi = ctx.declared.range
    try:
        scores = ctx.baseline()
    except Exception as exc:
        return Check("values", False, f"the batch raised {describe(exc)}")
    if shape_problem(scores, len(ctx.rows)):
        return Check("values", False, "not checked: the shape is wrong")
    problem = value_problem(scores, ctx.declared)
    if problem is None:
        nones = "allowed" if ctx.declared.allow_none else "never"
        return Check("values", True, f"finite, in [{lo}, {hi}], None {nones}")
    return Check("values", False, f"{problem}; {first_row_alone(ctx, lambda s: value_problem(s, ctx.declared))}")


def compare(ctx: Context, name: str, got: Any, expected: Sequence[Any], what: str, order: Sequence[int]) -> Check:
    i = first_difference(got, expected)
    if i is None:
        return Check(name, True, what)
    problem = shape_problem(got, len(expected))  # a length that differs is a shape problem: i is in both
    if problem:
        return Check(name, False, f"{what}: {problem}")
    return Check(name, False, f"{ctx.row(order[i])} scored {got[i]!r} instead of {expected[i]!r} ({what})")


def guarded(name: str, body: Callable[[], Check], ctx: Context | None = None) -> Check:
    """``body()``, an exception turned into a failure; not run (failed) when the batch's own shape is wrong."""
    try:
        if ctx is not None and shape_problem(ctx.baseline(), len(ctx.rows)):
            return Check(name, False, "not checked: the shape is wrong")
        return body()
    except Exception as exc:
        return Check(name, False, f"raised {describe(exc)}")


def check_determinism(ctx: Context) -> Check:
    """The same batch scored again until :data:`DRAWS` (``ctx.draws``) scores are drawn: a reward that flips a
    score with probability p per score gets through with probability (1 - p) ** draws, never by the luck of one
    repeat."""

    def body() -> Check:
        expected, n = ctx.baseline(), len(ctx.rows)
        # Isolated, this child starts from the state the gold batch's child started from: its first call replays
        # the gold call and proves nothing, so it does not count.
        repeats = max(1, math.ceil(ctx.draws / n)) + ctx.isolate
        for k in range(repeats):
            check = compare(
                ctx, "determinism", ctx.run(), expected, f"the same batch scored again (repeat {k + 1})", range(n)
            )
            if not check.passed:
                return check
        drawn = (repeats - ctx.isolate) * n
        return Check("determinism", True, f"the same batch scored again until {drawn} scores were drawn")

    return guarded("determinism", body, ctx)


def check_independence(ctx: Context) -> Check:
    def body() -> Check:
        expected, n = ctx.baseline(), len(ctx.rows)
        for i in range(n):
            alone = ctx.run([ctx.rows[i]])
            if shape_problem(alone, 1):
                return Check("independence", False, f"{ctx.row(i)} alone: {shape_problem(alone, 1)}")
            if not same(alone[0], expected[i]):
                detail = f"{ctx.row(i)} scores {alone[0]!r} alone, {expected[i]!r} in the batch"
                return Check("independence", False, detail)
        order = list(reversed(range(n)))
        got = ctx.run([ctx.rows[i] for i in order])
        return compare(ctx, "independence", got, [expected[i] for i in order], "the batch reversed", order)

    return guarded("independence", body, ctx)


def mutation(ctx: Context, conversational: bool) -> str | None:
    """What one call changed in what it was given (the completions list, its messages, a column), or None."""
    rows = ctx.copied()
    cols = columns_of(rows)
    completions = list(cols.get("completion", [""] * len(rows)))
    if conversational:
        completions = conversational_form(completions)
    before, before_completions = copy.deepcopy(cols), copy.deepcopy(completions)
    call(ctx.reward, completions, cols)
    if completions != before_completions:
        i = first_difference(completions, before_completions) or 0
        shown = short(completions[i], 80) if i < len(completions) else "nothing"
        kind = "conversational completion" if conversational else "completion"
        return f"changed the {kind} of row {i}: {shown}"
    for name, cells in cols.items():
        if cells != before[name]:
            i = first_difference(cells, before[name]) or 0
            was = short(before[name][i], 50) if i < len(before[name]) else "nothing"
            now = short(cells[i], 50) if i < len(cells) else "nothing"
            return f"changed column {name!r}: row {i} was {was}, is now {now}"
    return None


def check_no_mutation(ctx: Context) -> Check:
    """Nothing the reward is given changes: the completions list and every column (TRL's message lists are the
    ``conversational`` check's)."""

    def body() -> Check:
        problem = mutation(ctx, False)
        if problem is not None:
            return Check("no_mutation", False, problem)
        return Check("no_mutation", True, "completions and columns unchanged")

    return guarded("no_mutation", body, ctx)


def check_extra_columns(ctx: Context) -> Check:
    n = len(ctx.rows)
    # ``prompts`` is an extra only for a reward that does not name it: one that does gets the real prompts.
    offered = {**({} if names_prompts(ctx.reward) else {"prompts": ""}), **EXTRA}
    extras: dict[str, Any] = {k: [v] * n for k, v in offered.items() if not any(k in r for r in ctx.rows)}
    if not takes(ctx.reward, "trainer_state"):  # the others get it with every batch (calling.call)
        extras["trainer_state"] = TRAINER_STATE  # one TrainerState for the batch, as the trainers pass it

    def body() -> Check:
        expected = ctx.baseline()
        try:
            got = ctx.run(**extras)
        except Exception as exc:
            for name in extras:  # which one alone breaks it
                try:
                    ctx.run(**{name: extras[name]})
                except Exception:
                    return Check("extra_columns", False, f"rejects the extra column {name!r}: {describe(exc)}")
            return Check("extra_columns", False, f"rejects extra columns {sorted(extras)}: {describe(exc)}")
        return compare(ctx, "extra_columns", got, expected, f"with extra columns {sorted(extras)}", range(n))

    return guarded("extra_columns", body, ctx)


def check_missing_column(ctx: Context) -> Check:
    names = [c for c in dict.fromkeys(k for r in ctx.rows for k in r) if c not in ("completion", "prompt")]
    required = [c for c in ctx.declared.columns if c not in names]
    if required:
        return Check("missing_column", False, f"the rows lack the declared column(s) {required}: add them to the rows")
    needed = []
    for name in names:
        rows = [{k: v for k, v in r.items() if k != name} for r in ctx.rows]
        try:
            ctx.run(rows)
        except Exception as exc:
            if name not in str(exc) and name not in repr(exc):
                why = f"without column {name!r} it raised {describe(exc)}, not naming it"
                return Check("missing_column", False, why)
            needed.append(name)
            continue
        if name in ctx.declared.columns:
            return Check("missing_column", False, f"scored without the declared column {name!r} instead of raising")
    return Check("missing_column", True, f"named when missing: {needed}" if needed else "no column is needed")
