"""The tables people read (rich), and the highlighted tokens of ``lint tokens --show``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rewardkit.lint.tokens import RowTokens
from rewardkit.testing.content import PER_ROW

PASS, FAIL = "ok", "FAIL"
CONTEXT_CHARS = 60  # of an untrained stretch, kept on each side of the trained tokens when --show elides it


def _mark(passed: bool) -> Text:
    return Text(PASS, style="green") if passed else Text(FAIL, style="bold red")


def checks_table(checks: Sequence[Mapping[str, Any]], title: str) -> Table:
    """One line per check: name, ok/FAIL, detail (the ``--json`` report's ``checks``)."""
    table = Table(title=title, title_justify="left")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in checks:
        table.add_row(Text(c["name"]), _mark(c["passed"]), Text(c["detail"]))
    return table


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "—" if value is None else format(value, fmt)


def recipe_view(result: Mapping[str, Any]) -> Group:
    """The rewards, the probes, the zero-variance groups and the correlations of a ``lint RECIPE`` report."""
    head = Text(
        f"{result['recipe']}: {result['rows']} rows (gold: {result['gold']}), config {result['config'] or 'defaults'} "
        f"({result['config_from']}), num_generations {result['num_generations']}"
    )
    rewards = Table(title="rewards (every gold and probe completion, one call each)", title_justify="left")
    for name in ("reward", "weight", "gold", "error", "None", "NaN", "p50 ms", "p99 ms"):
        rewards.add_column(name, justify="left" if name == "reward" else "right")
    for key, r in result["rewards"].items():
        rewards.add_row(
            key,
            f"{r['weight']:g}",
            f"{r['gold_mean']:.3f}",
            f"{r['error_rate']:.1%}",
            f"{r['none_rate']:.1%}",
            f"{r['nan_rate']:.1%}",
            f"{r['p50_ms']:.3f}",
            f"{r['p99_ms']:.3f}",
        )
    title = (
        "probes (weighted score, mean over rows; * judged per row, a near miss or do_nothing: below the gold on each)"
    )
    probes = Table(title=title, title_justify="left")
    for name in ("probe", "gold", "probe score", "gap", "result", "rows where a reward scores it >= gold"):
        probes.add_column(name, justify="right" if name in ("gold", "probe score", "gap") else "left")
    for name, p in result["probes"].items():
        through = ", ".join(f"{k} {n}/{p['rows']}" for k, n in p["let_through_by"].items()) or "—"
        shown = f"{name} *" if name in PER_ROW else name
        probes.add_row(
            shown, f"{p['gold']:.3f}", f"{p['probe']:.3f}", f"{p['gap']:.3f}", _mark(not p["flagged"]), through
        )
    parts: list[Any] = [head, rewards, probes]
    zv = result.get("zero_variance")
    if zv:
        table = Table(
            title=f"zero-variance groups ({zv['groups']} groups, {zv['samples']} samples)", title_justify="left"
        )
        table.add_column("score")
        table.add_column("share of groups", justify="right")
        table.add_row("weighted", f"{zv['weighted']:.1%}")
        for key, share in zv["per_reward"].items():
            table.add_row(key, f"{share:.1%}")
        parts.append(table)
    corr = result["correlation"]
    if len(corr["keys"]) > 1:
        table = Table(
            title=f"correlation ({corr['samples']} samples; — where a reward is constant)", title_justify="left"
        )
        table.add_column("")
        for i in range(len(corr["keys"])):
            table.add_column(str(i + 1), justify="right")
        for i, (key, row) in enumerate(zip(corr["keys"], corr["matrix"], strict=True)):
            table.add_row(f"{i + 1} {key}", *(_num(v, ".2f") for v in row))
        parts.append(table)
    failed = [c for c in result["checks"] if not c["passed"]]
    n = len(result["checks"])
    summary = checks_table(failed, f"{len(failed)} of {n} checks failed") if failed else Text(f"all {n} checks passed")
    parts.append(summary)
    return Group(*parts)


def tokens_view(result: Mapping[str, Any]) -> Group:
    table = Table(title=f"tokens by role over {result['rows']} rows", title_justify="left")
    for name in ("role", "tokens", "with loss"):
        table.add_column(name, justify="left" if name == "role" else "right")
    for role, c in result["tokens"].items():
        table.add_row(role, str(c["tokens"]), str(c["loss"]))
    parts: list[Any] = [table]
    if result["problems"]:
        problems = Table(title="problems", title_justify="left")
        for name in ("row", "rule", "detail"):
            problems.add_column(name, overflow="fold")
        for p in result["problems"][:50]:
            problems.add_row(str(p["row"] + 1), p["rule"], Text(p["detail"]))
        parts.append(problems)
    return Group(*parts)


def highlighted(row: RowTokens) -> Text:
    """The row's text with trained tokens between ⟦ ⟧ (bold green on a terminal); long untrained stretches are
    cut to their first and last CONTEXT_CHARS characters."""
    out = Text()
    runs: list[tuple[bool, str]] = []
    for piece, lost in zip(row.pieces, row.loss, strict=True):
        if runs and runs[-1][0] == lost:
            runs[-1] = (lost, runs[-1][1] + piece)
        else:
            runs.append((lost, piece))
    for lost, text in runs:
        if lost:
            out.append("⟦" + text + "⟧", style="bold green")
        elif len(text) > 3 * CONTEXT_CHARS:
            cut = len(text) - 2 * CONTEXT_CHARS
            out.append(text[:CONTEXT_CHARS], style="dim")
            out.append(f" … {cut} characters without loss … ", style="italic yellow")
            out.append(text[-CONTEXT_CHARS:], style="dim")
        else:
            out.append(text, style="dim")
    return out
