"""The adversarial checks: hostile inputs under a time bound, and gaming probes against the gold."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rewardkit.testing.checks import Context, guarded, shape_problem, short, value_problem
from rewardkit.testing.hostile import HOSTILE, bounded, describe, show, shrink
from rewardkit.testing.probes import probes
from rewardkit.testing.report import Check

SHRINK_ATTEMPTS = 24


def context_row(ctx: Context) -> dict[str, Any]:
    """The row hostile inputs are put into: the first whose own completion scores a finite number (the first row
    when none does, or the batch raises)."""
    try:
        scores = ctx.baseline()
    except Exception:
        return dict(ctx.rows[0])
    for row, s in zip(ctx.rows, scores if isinstance(scores, list | tuple) else [], strict=False):
        if isinstance(s, float) and math.isfinite(s):
            return dict(row)
    return dict(ctx.rows[0])


def hostile_row(ctx: Context, row: Mapping[str, Any], text: str) -> dict[str, Any]:
    out = {**row, "completion": text}
    if ctx.declared.tool_use:  # the text as the agent's one turn, after the row's prompt turns
        messages = row.get("messages") if isinstance(row.get("messages"), list) else []
        prompt = []
        for m in messages:
            if isinstance(m, Mapping) and m.get("role") == "assistant":
                break
            prompt.append(m)
        out["messages"] = [*prompt, {"role": "assistant", "content": text}]
    return out


def check_hostile(ctx: Context, name: str, text: str) -> Check:
    """The reward gives one valid score for ``text``, within the time limit; a failure is shrunk. Whatever goes
    wrong outside the reward's call (no process could be forked) is a failure too, not an exception."""
    return guarded(f"hostile:{name}", lambda: _hostile(ctx, name, text))


def _hostile(ctx: Context, name: str, text: str) -> Check:
    row = context_row(ctx)
    limit = ctx.time_limit_s

    def judge(scores: Any) -> str | None:
        return shape_problem(scores, 1) or value_problem(scores, ctx.declared)

    def attempt(candidate: str) -> Any:
        probe = hostile_row(ctx, row, candidate)
        return bounded(lambda: ctx.run([probe]), judge, limit, ctx.isolate)

    def failure(outcome: Any) -> str | None:
        if outcome.status == "timeout":
            return f"did not finish within {limit:g} s"
        if outcome.status == "ok" and outcome.problem is None and outcome.seconds > limit:
            return f"took {outcome.seconds:.1f} s (limit {limit:g} s)"
        return outcome.problem if outcome.status != "raised" else f"raised {outcome.problem}"

    first = failure(attempt(text))
    if first is None:
        return Check(f"hostile:{name}", True, f"a valid score within {limit:g} s on {show(text)}")
    small = shrink(text, lambda c: failure(attempt(c)) is not None, SHRINK_ATTEMPTS, 4 * limit + 2)
    why = failure(attempt(small)) if small != text else first
    return Check(f"hostile:{name}", False, f"{why or first}; smallest failing input found: {show(small)}")


def hostile_checks(ctx: Context, names: list[str]) -> list[Check]:
    return [check_hostile(ctx, name, HOSTILE[name]) for name in names]


def _shown_probe(row: Mapping[str, Any], tool_use: bool) -> str:
    if tool_use:
        messages = row.get("messages") or []
        return f"{len(messages)} messages, the last {short(messages[-1] if messages else None, 70)}"
    return show(row["completion"])


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


def gaming_checks(ctx: Context, wanted: Any) -> list[Check]:
    """Per probe: on every row whose completion scores at least ``low + margin``, the probe scores a margin
    below it. ``wanted(name)`` selects the probes to report; a probe the reward declares ``gameable`` passes,
    marked waived, with the reason."""
    lo, _ = ctx.declared.range
    gaps, tool_use = ctx.declared.gameable, ctx.declared.tool_use
    try:
        golds = ctx.baseline()
    except Exception as exc:
        return [Check("gaming", False, f"not checked: the batch raised {describe(exc)}")]
    if shape_problem(golds, len(ctx.rows)):
        return [Check("gaming", False, "not checked: the shape is wrong")]
    eligible = [i for i, g in enumerate(golds) if g is not None and math.isfinite(g) and g >= lo + ctx.margin]
    if not eligible:
        detail = f"no row's completion scores at least {lo + ctx.margin:g}: give rows whose completion is a good one"
        return [Check("gaming", "*" in gaps, detail if "*" not in gaps else f"waived ({gaps['*']}); {detail}")]
    verdicts: dict[str, tuple[str | None, float]] = {}  # probe -> (first violation, smallest gap seen)
    unbuilt: list[Check] = []  # rows whose probes could not be built
    for i in eligible:
        gold = golds[i]
        try:
            built = {n: p for n, p in probes(ctx.rows[i], tool_use=tool_use).items() if wanted(f"gaming:{n}")}
        except Exception as exc:
            unbuilt.append(Check("gaming", False, f"{ctx.row(i)}: building its probes raised {describe(exc)}"))
            continue
        names = list(built)
        scores = _probe_scores(ctx, [built[n] for n in names])
        for name, s in zip(names, scores, strict=True):
            seen, gap = verdicts.get(name, (None, math.inf))
            if isinstance(s, Exception):
                bad = f"row {i}: the probe raised {describe(s)}"
            elif s is not None and s > gold - ctx.margin + 1e-12:
                bad = (
                    f"row {i}: scores {s:.4g}, its gold {gold:.4g} (needs <= {gold - ctx.margin:.4g}, margin "
                    f"{ctx.margin:g}); probe: {_shown_probe(built[name], tool_use)}"
                )
            else:
                bad = None
                gap = min(gap, gold - (s if s is not None else lo))
            verdicts[name] = (seen or bad, gap)
    out = unbuilt[:1]  # the first such row
    for name, (bad, gap) in verdicts.items():
        reason = gaps.get(name, gaps.get("*"))
        if bad is None:
            out.append(Check(f"gaming:{name}", True, f"at least {gap:.3g} below the gold on {len(eligible)} row(s)"))
        elif reason is not None:
            out.append(Check(f"gaming:{name}", True, f"waived ({reason}): {bad}"))
        else:
            out.append(Check(f"gaming:{name}", False, bad))
    return out
