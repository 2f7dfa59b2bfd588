"""``check_reward``: every check of the reward contract on a reward and a few rows of its data."""

from __future__ import annotations

import contextlib
import math
import os
import pickle
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rewardkit.errors import UserError
from rewardkit.testing import checks as generic
from rewardkit.testing import runtime
from rewardkit.testing.adversarial import gaming_checks, hostile_checks
from rewardkit.testing.calling import declared, name_of
from rewardkit.testing.checks import DRAWS, Context
from rewardkit.testing.content import ALL_PROBES, CONTENT_PROBES
from rewardkit.testing.hostile import HOSTILE, bounded, describe
from rewardkit.testing.probes import COMPLETION_PROBES, TOOL_USE_PROBES
from rewardkit.testing.report import Check, Report

GROUPS = ("hostile", "gaming")
GENERIC: dict[str, Callable[[Context], Check]] = {
    "shape": generic.check_shape,
    "values": generic.check_values,
    "determinism": generic.check_determinism,
    "independence": generic.check_independence,
    "no_mutation": generic.check_no_mutation,
    "extra_columns": generic.check_extra_columns,
    "missing_column": generic.check_missing_column,
    "pickle": runtime.check_pickle,
    "threads": runtime.check_threads,
    "conversational": runtime.check_conversational,
}


CHECK_TIME_S = 60.0  # a check (or the gold batch) that runs longer has hung
MARGIN = 0.1  # how far below the gold a probe must score, by default (at most the range's width)


class KitError(UserError, ValueError):
    """An argument of :func:`check_reward` that cannot be meant (no rows, an unknown check, a NaN margin …)."""


def check_names() -> list[str]:
    """Every check name the kit can report (``gaming`` alone: when no row can be compared with its probes)."""
    return [*GENERIC, *(f"hostile:{n}" for n in HOSTILE), "gaming", *(f"gaming:{n}" for n in ALL_PROBES)]


def _names(option: str, names: Iterable[str]) -> set[str]:
    chosen = {names} if isinstance(names, str) else set(names)
    known = set(check_names()) | set(GROUPS)
    unknown = sorted(chosen - known)
    if unknown:
        raise KitError(f"{option}: unknown check(s) {unknown}; the checks are {', '.join(sorted(known))}")
    return chosen


def _matches(name: str, names: set[str] | None) -> bool:
    """Whether check ``name`` is among ``names`` by itself or by its group (every check when ``names`` is None)."""
    return names is None or name in names or name.split(":", 1)[0] in names


def _selection(checks: Iterable[str] | None, skip: Iterable[str]) -> tuple[Callable[[str], bool], list[str]]:
    """Whether a check runs (chosen by ``checks``, every check when None, and not left out by ``skip``), and the
    checks that ``skip`` left out of the chosen ones."""
    chosen = None if checks is None else _names("checks", checks)
    if chosen is not None and not chosen:
        raise KitError("checks=[] selects no check; pass checks=None for every check")
    left_out = _names("skip", skip)
    skipped = [n for n in check_names() if _matches(n, chosen) and _matches(n, left_out)]
    if all(not _matches(n, chosen) or n in skipped for n in check_names()):
        raise KitError(f"skip={sorted(left_out)} leaves no check to run")
    return (lambda name: _matches(name, chosen) and not _matches(name, left_out)), skipped


def _number(name: str, value: Any, low: float, high: float, *, low_open: bool = False) -> float:
    """A finite number in [low, high] (``(low, high]`` with ``low_open``), else a ValueError naming it."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value > high or value < low or (low_open and value == low):
        bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise KitError(f"{name} must be a finite number in {bound}; got {value!r}")
    return float(value)


def _rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = list(rows)  # a generator is read once, here
    if not rows:
        raise KitError("check_reward needs at least one row")
    bad = [i for i, r in enumerate(rows) if not isinstance(r, Mapping) or "completion" not in r]
    if bad:
        raise KitError(f"every row must be a dict with a 'completion'; rows {bad} are not")
    return [dict(r) for r in rows]


def _unit(ctx: Context, label: str, fn: Callable[[], list[Check]], limit_s: float) -> tuple[list[Check], bool]:
    """``fn()``'s checks, run in a forked child when ``ctx.isolate``: a reward that ends its process, is killed by
    a signal or hangs past ``limit_s`` fails the check (``label``) instead of ending or hanging the run. Also
    whether the child ended that way (its checks are then that one failure)."""
    if not ctx.isolate:
        return fn(), False
    outcome = bounded(fn, limit_s)
    if outcome.status == "ok":
        return outcome.value, False
    if outcome.status == "timeout":
        why = f"did not finish within {limit_s:g} s: the reward hangs, or needs a larger check_time_s"
    elif outcome.status == "crashed":
        why = f"the reward ended its process: {outcome.value}"
    else:
        why = f"raised {outcome.value}"
    return [Check(label, False, why)], True


def _group(
    ctx: Context,
    label: str,
    names: list[str],
    checks_of: Callable[[Callable[[str], bool]], list[Check]],
    limit_s: float,
) -> list[Check]:
    """A group's checks (``checks_of(selected)``) in one child; when the reward ends or hangs it, each named check in
    a child of its own, so that the failure names the check behind it."""
    if not names:
        return []
    chosen = set(names)
    checks, ended = _unit(ctx, label, lambda: checks_of(chosen.__contains__), limit_s)
    if not ended:
        return checks
    out: list[Check] = []
    for name in names:
        out += _unit(ctx, name, lambda name=name: checks_of(lambda n: n == name), limit_s)[0]
    return out


def _warm_hostile(ctx: Context, selected: Callable[[str], bool]) -> list[Check]:
    """The hostile checks, after one call on the rows: their forked attempts start from a reward that has loaded
    what its first call loads, as the trainer's reward has."""
    with contextlib.suppress(Exception):  # what the batch does is the other checks' business
        ctx.run()
    return hostile_checks(ctx, [n for n in HOSTILE if selected(f"hostile:{n}")])


def _hostile_budget(ctx: Context, names: list[str], limit_s: float) -> float:
    """The hostile group's bound: the warm-up call, then per input its batch, each row alone and the shrinking."""
    rows = len(ctx.rows)
    return limit_s + len(names) * ((2 * rows + 6) * ctx.time_limit_s + 3)


def _gold(ctx: Context, limit_s: float) -> None:
    """The batch's scores, computed once in a bounded child, so that no call of the reward in this process can
    hang or end it; what went wrong becomes the exception every check reports."""

    def scores() -> Any:
        try:
            return ctx.run()
        except Exception as exc:  # travels back as the batch's outcome, as itself when it can
            try:
                return pickle.loads(pickle.dumps(exc))
            except Exception:
                return RuntimeError(describe(exc))

    outcome = bounded(scores, limit_s)
    if outcome.status == "ok":
        ctx.preset(outcome.value)
    elif outcome.status == "timeout":
        ctx.preset(TimeoutError(f"the batch did not finish within {limit_s:g} s"))
    else:
        ctx.preset(RuntimeError(f"the batch {outcome.status}: {outcome.value}"))


def check_reward(
    reward: Callable[..., Any],
    rows: Iterable[Mapping[str, Any]],
    *,
    range: tuple[float, float] | None = None,  # shadows the builtin: the public keyword
    allow_none: bool | None = None,
    margin: float | None = None,
    time_limit_s: float = 2.0,
    checks: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    tool_use: bool | None = None,
    gameable: Mapping[str, str] | None = None,
    isolate: bool = True,
    draws: int = DRAWS,
    check_time_s: float = CHECK_TIME_S,
) -> Report:
    """Run the reward contract on ``reward`` with ``rows`` (dataset columns plus ``completion``, a gold
    completion that should score well) and return the :class:`Report`; it never raises for a failed check.

    ``range`` and ``allow_none`` default to the reward's ``range`` and ``may_return_none`` attributes, else
    [0, 1] with None allowed; ``margin`` to 0.1, or the range's width when that is narrower; ``tool_use``
    (probes on ``messages``) to whether it reads ``messages``; ``gameable`` (probe name or ``"*"`` -> why) to its
    ``gameable`` attribute. ``checks`` keeps only the named
    checks and ``skip`` leaves the named ones out (``"hostile"`` and ``"gaming"`` name their whole group); the
    report lists what was skipped. ``draws`` is how many scores the determinism check draws. With ``isolate``
    (the default, where the platform can fork) the gold batch and each check run in a child process bounded by
    ``check_time_s``, and each hostile call in one bounded by ``time_limit_s``; ``isolate=False`` runs all in
    this process: a hang is then measured, not stopped, and a process exit is the caller's.
    """
    rows = _rows(rows)
    wanted, skipped = _selection(checks, skip)
    promised = declared(reward, range, allow_none, tool_use, gameable)
    lo, hi = promised.range
    if not isinstance(draws, int) or isinstance(draws, bool) or draws < 1:
        raise KitError(f"draws must be an integer >= 1; got {draws!r}")
    ctx = Context(
        reward=reward,
        rows=rows,
        declared=promised,
        margin=_number("margin", min(MARGIN, hi - lo) if margin is None else margin, 0.0, hi - lo),
        time_limit_s=_number("time_limit_s", time_limit_s, 0.0, 3600.0, low_open=True),
        isolate=isolate and hasattr(os, "fork"),
        draws=draws,
    )
    limit = _number("check_time_s", check_time_s, 0.0, 86400.0, low_open=True)
    kind = set(TOOL_USE_PROBES if promised.tool_use else COMPLETION_PROBES) | set(CONTENT_PROBES)
    applies = [n for n in skipped if not n.startswith("gaming:") or n.removeprefix("gaming:") in kind]
    report = Report(reward=name_of(reward), skipped=applies)
    report.checks += _run_checks(ctx, wanted, limit)
    return report


def _run_checks(ctx: Context, wanted: Callable[[str], bool], limit: float) -> list[Check]:
    """The gold batch (when isolated), then the generic, hostile and gaming checks that ``wanted`` keeps, each
    unit bounded by ``limit`` seconds; their results in that order."""
    out: list[Check] = []
    if ctx.isolate:
        _gold(ctx, limit)
    for name, check in GENERIC.items():
        if wanted(name):
            out += _unit(ctx, name, lambda check=check: [check(ctx)], limit)[0]
    hostile = [f"hostile:{n}" for n in HOSTILE if wanted(f"hostile:{n}")]
    out += _group(ctx, "hostile", hostile, lambda on: _warm_hostile(ctx, on), _hostile_budget(ctx, hostile, limit))
    gaming = [n for n in check_names() if n.startswith("gaming:") and wanted(n)]
    if wanted("gaming") or gaming:
        out += _group(ctx, "gaming", gaming, lambda on: gaming_checks(ctx, on), limit)
    return out
