"""``check_reward``: every check of the reward contract on a reward and a few rows of its data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rewardkit.testing import checks as generic
from rewardkit.testing import runtime
from rewardkit.testing.adversarial import gaming_checks, hostile_checks
from rewardkit.testing.calling import declared, name_of
from rewardkit.testing.checks import Context
from rewardkit.testing.hostile import HOSTILE
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


def check_names() -> list[str]:
    """Every check name the kit can report (``gaming`` alone: when no row can be compared with its probes)."""
    probes = dict.fromkeys((*COMPLETION_PROBES, *TOOL_USE_PROBES))
    return [*GENERIC, *(f"hostile:{n}" for n in HOSTILE), "gaming", *(f"gaming:{n}" for n in probes)]


def _selector(checks: Iterable[str] | None) -> Callable[[str], bool]:
    if checks is None:
        return lambda name: True
    chosen = set(checks)
    known = set(check_names()) | set(GROUPS)
    unknown = sorted(chosen - known)
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; the checks are {', '.join(sorted(known))}")
    return lambda name: name in chosen or name.split(":", 1)[0] in chosen


def check_reward(
    reward: Callable[..., Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    range: tuple[float, float] | None = None,  # shadows the builtin: the public keyword
    allow_none: bool | None = None,
    margin: float = 0.1,
    time_limit_s: float = 2.0,
    checks: Iterable[str] | None = None,
    tool_use: bool | None = None,
    gameable: Mapping[str, str] | None = None,
    isolate: bool = True,
) -> Report:
    """Run the reward contract on ``reward`` with ``rows`` (dataset columns plus ``completion``, a gold
    completion that should score well) and return the :class:`Report`; it never raises for a failed check.

    ``range`` and ``allow_none`` default to the reward's ``range`` and ``may_return_none`` attributes, else
    [0, 1] with None allowed; ``tool_use`` (probes on ``messages``) to whether it reads ``messages``;
    ``gameable`` (probe name or ``"*"`` -> why) to its ``gameable`` attribute. ``checks`` keeps only the named
    checks (``"hostile"`` and ``"gaming"`` name their whole group). ``isolate=False`` runs hostile inputs in
    this process: a hang is then measured, not stopped.
    """
    if not rows:
        raise ValueError("check_reward needs at least one row")
    bad = [i for i, r in enumerate(rows) if not isinstance(r, Mapping) or "completion" not in r]
    if bad:
        raise ValueError(f"every row must be a dict with a 'completion'; rows {bad} are not")
    if margin < 0 or time_limit_s <= 0:
        raise ValueError("margin must be >= 0 and time_limit_s > 0")
    wanted = _selector(checks)
    ctx = Context(
        reward=reward,
        rows=[dict(r) for r in rows],
        declared=declared(reward, range, allow_none, tool_use, gameable),
        margin=margin,
        time_limit_s=time_limit_s,
        isolate=isolate,
    )
    report = Report(reward=name_of(reward))
    report.checks += [check(ctx) for name, check in GENERIC.items() if wanted(name)]
    report.checks += hostile_checks(ctx, [n for n in HOSTILE if wanted(f"hostile:{n}")])
    if wanted("gaming") or any(wanted(n) for n in check_names() if n.startswith("gaming:")):
        report.checks += gaming_checks(ctx, wanted)
    return report
