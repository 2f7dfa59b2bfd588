"""The adversarial checks: hostile inputs under a time bound, and gaming probes against the gold."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rewardkit.testing.checks import Context, guarded, shape_problem, short, short_of_gold, value_problem
from rewardkit.testing.content import NEAR_MISS, all_probes
from rewardkit.testing.hostile import HOSTILE, Outcome, bounded, describe, show, shrink
from rewardkit.testing.probes import agent_turns, gold_text, said, shaped
from rewardkit.testing.report import Check

SHRINK_ATTEMPTS = 24


def usable_rows(ctx: Context) -> list[int]:
    """The rows hostile inputs are put into: every row whose own completion scores a finite number (every row
    when none does, or the batch raises), so that the verdict never depends on the rows' order."""
    try:
        scores = ctx.baseline()
    except Exception:
        return list(range(len(ctx.rows)))
    scores = scores if isinstance(scores, list | tuple) else []
    finite = [i for i, s in enumerate(scores[: len(ctx.rows)]) if isinstance(s, float) and math.isfinite(s)]
    return finite or list(range(len(ctx.rows)))


def hostile_row(ctx: Context, row: Mapping[str, Any], text: str) -> dict[str, Any]:
    out = {**row, "completion": shaped(row, text)}
    if ctx.declared.tool_use:  # the text as the agent's one turn, after the row's prompt turns
        messages = row.get("messages") if isinstance(row.get("messages"), list) else []
        out["messages"] = [*agent_turns(messages)[0], said(text)]
    return out


def check_hostile(ctx: Context, name: str, text: str) -> Check:
    """The reward gives a valid score for ``text`` in every usable row, within the time limit per completion; a
    failure names the first such row and is shrunk on it. Whatever goes wrong outside the reward's call (no
    process could be forked) is a failure too, not an exception."""
    return guarded(f"hostile:{name}", lambda: _hostile(ctx, name, text))


def _hostile(ctx: Context, name: str, text: str) -> Check:
    usable = usable_rows(ctx)
    limit = ctx.time_limit_s

    def attempt(candidate: str, where: list[int]) -> Outcome:
        rows = [hostile_row(ctx, ctx.rows[i], candidate) for i in where]
        judge = lambda scores: shape_problem(scores, len(rows)) or value_problem(scores, ctx.declared)  # noqa: E731
        return bounded(lambda: judge(ctx.run(rows)), limit * len(rows), ctx.isolate)

    def failure(outcome: Outcome, k: int) -> str | None:
        if outcome.status == "timeout":
            return f"did not finish within {limit * k:g} s"
        if outcome.status == "ok" and outcome.value is None and outcome.seconds > limit * k:
            return f"took {outcome.seconds:.1f} s (limit {limit * k:g} s)"
        if outcome.status == "raised":
            return f"raised {outcome.value}"
        return outcome.value

    first = failure(attempt(text, usable), len(usable))
    if first is None:
        return Check(f"hostile:{name}", True, f"a valid score within {limit:g} s per row on {show(text)}")
    row = next((i for i in usable if failure(attempt(text, [i]), 1) is not None), None)
    if row is None:  # only the batch of them fails
        where = "rows " + ", ".join(map(str, usable))
        return Check(f"hostile:{name}", False, f"{first}, on {show(text)} in {where} together, in no row alone")
    small = shrink(text, lambda c: failure(attempt(c, [row]), 1) is not None, SHRINK_ATTEMPTS, 4 * limit + 2)
    why = failure(attempt(small, [row]), 1) if small != text else first
    return Check(f"hostile:{name}", False, f"{why or first}; in row {row}, smallest failing input found: {show(small)}")


def hostile_checks(ctx: Context, names: list[str]) -> list[Check]:
    return [check_hostile(ctx, name, HOSTILE[name]) for name in names]


def _shown_probe(row: Mapping[str, Any], tool_use: bool) -> str:
    if tool_use:
        messages = row.get("messages") or []
        return f"{len(messages)} messages, the last {short(messages[-1] if messages else None, 70)}"
    return show(gold_text(row))


def _probe_scores(ctx: Context, rows: list[dict[str, Any]]) -> list[Any]:
    """The probes' scores in one batch; when the batch fails, each alone (an exception in place of a score)."""
    try:
        scores = ctx.run(rows)
        if not shape_problem(scores, len(rows)):
            return list(scores)
    except Exception:
        pass
    out: list[Any] = []
    for row in rows:
        try:
            alone = ctx.run([row])
            out.append(alone[0] if not shape_problem(alone, 1) else ValueError(shape_problem(alone, 1)))
        except Exception as exc:
            out.append(exc)
    return out


def _probe_problem(ctx: Context, s: Any, gold: float, near_miss: bool) -> str | None:
    """Why a probe's score fails against its row's gold: it breaks the values rules, or it is not below the gold
    (a near miss) or not a margin below it (every other probe); None when it is fine."""
    if isinstance(s, Exception):
        return f"the probe raised {describe(s)}"
    problem = value_problem([s], ctx.declared)
    if problem is not None:
        return f"the probe's score breaks the values rules: {problem.removeprefix('value 0 is ')}"
    if s is None:
        return None
    if short_of_gold(gold, s, None if near_miss else ctx.margin):
        return None
    if near_miss:
        return f"scores {s:.4g}, its gold {gold:.4g} (a near miss must score below the gold)"
    return f"scores {s:.4g}, its gold {gold:.4g} (needs <= {gold - ctx.margin:.4g}, margin {ctx.margin:g})"


def _eligible(ctx: Context) -> list[int] | Check:
    """The rows whose completion is a gold to compare probes with (scores at least ``low + margin``), or the
    failed ``gaming`` check that says why there are none."""
    lo, _ = ctx.declared.range
    gaps = ctx.declared.gameable
    try:
        golds = ctx.baseline()
    except Exception as exc:
        return Check("gaming", False, f"not checked: the batch raised {describe(exc)}")
    if shape_problem(golds, len(ctx.rows)):
        return Check("gaming", False, "not checked: the shape is wrong")
    eligible = [i for i, g in enumerate(golds) if g is not None and math.isfinite(g) and g >= lo + ctx.margin]
    if not eligible:
        detail = f"no row's completion scores at least {lo + ctx.margin:g}: give rows whose completion is a good one"
        return Check("gaming", "*" in gaps, detail if "*" not in gaps else f"waived ({gaps['*']}); {detail}")
    return eligible


def gaming_checks(ctx: Context, wanted: Any) -> list[Check]:
    """Per probe (the form probes and the content probes, :func:`~rewardkit.testing.content.all_probes`, built
    from the eligible rows): on every row whose completion scores at least ``low + margin``, the probe scores a
    margin below it, a near miss (:data:`~rewardkit.testing.content.NEAR_MISS`) below it, and either keeps the
    values rules. ``wanted(name)`` selects the probes to report; a probe the reward declares ``gameable`` passes,
    marked waived, with the reason."""
    eligible = _eligible(ctx)
    if isinstance(eligible, Check):
        return [eligible]
    lo, _ = ctx.declared.range
    golds = ctx.baseline()
    try:  # across every row (another row's gold may be a poor one), compared on the eligible rows
        built_all = all_probes(ctx.rows, tool_use=ctx.declared.tool_use)
    except Exception as exc:
        return [Check("gaming", False, f"building the probes raised {describe(exc)}")]
    verdicts: dict[str, tuple[str | None, float, int]] = {}  # probe -> (first violation, smallest gap, rows)
    for i in eligible:
        built = built_all[i]
        names = [n for n in built if wanted(f"gaming:{n}")]
        scores = _probe_scores(ctx, [built[n] for n in names])
        for name, s in zip(names, scores, strict=True):
            seen, gap, rows = verdicts.get(name, (None, math.inf, 0))
            bad = _probe_problem(ctx, s, golds[i], name in NEAR_MISS)
            if bad is None:
                gap = min(gap, golds[i] - (s if s is not None else lo))
            else:
                bad = f"row {i}: {bad}; probe: {_shown_probe(built[name], ctx.declared.tool_use)}"
            verdicts[name] = (seen or bad, gap, rows + 1)
    return [_verdict(ctx, name, *verdict) for name, verdict in verdicts.items()]


def _verdict(ctx: Context, name: str, bad: str | None, gap: float, rows: int) -> Check:
    gaps = ctx.declared.gameable
    reason = gaps.get(name, gaps.get("*"))
    if bad is None:
        return Check(f"gaming:{name}", True, f"at least {gap:.3g} below the gold on {rows} row(s)")
    if reason is not None:
        return Check(f"gaming:{name}", True, f"waived ({reason}): {bad}")
    return Check(f"gaming:{name}", False, bad)
