"""``rewardkit lint RECIPE.yaml``: a recipe's whole reward set on your own rows, before a GPU hour is spent.

1. Every reward scores the gold of every row and every gaming probe of it, one completion per call: its error,
   None and NaN rates and its p50/p99 latency per completion. The probes are the kit's
   (``rewardkit.testing.content.all_probes``): the form probes of each row, and the content probes built across
   the rows (another row's gold, the most common gold, and the gold minimally wrong: the near misses).
2. Per probe: the weighted score (``reward_weights``) against the gold's. A probe whose mean over the rows is
   within ``margin`` x (the sum of the weights) of the gold's gets through; a near miss gets through when on some
   row it does not score below the gold. The report names the rewards that let it through: those (weight > 0)
   that score the probe at least as high as the gold on some rows (with the number of rows).
3. With SFT samples (``--sft``): GRPO groups of ``num_generations`` samples per prompt, and the predicted share of
   groups with zero reward variance (no advantage, no gradient), weighted and per reward.
4. The correlation matrix between the rewards, over the SFT samples (else over the golds and the probes).

A failure: a reward raised (error rate > 0) or returned NaN, a p99 latency over ``time_limit_s``, a probe that
gets through, or (with ``max_zero_variance``) too many zero-variance groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardkit.files.jsonl import read_rows
from rewardkit.lint.gold import NoGoldError, with_gold
from rewardkit.lint.recipe import Recipe, RecipeError, build_rewards, read_recipe
from rewardkit.lint.samples import Cell, correlation, expand, rates, score_all, weighted, zero_variance
from rewardkit.testing.checks import short_of_gold
from rewardkit.testing.content import NEAR_MISS, PER_ROW, all_probes


@dataclass(frozen=True)
class Options:
    margin: float = 0.1  # a probe within margin x sum(weights) of the gold gets through
    time_limit_s: float = 2.0  # p99 latency per completion
    group_by: str | None = None  # --sft rows: the prompt column (default: every column but the completion)
    max_zero_variance: float | None = None  # fail when more groups than this share have zero variance
    config: str | None = None  # --config


@dataclass
class RecipeLint:
    recipe: Recipe
    rows: int
    gold_from: str
    rewards: dict[str, dict[str, Any]] = field(default_factory=dict)
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    zero_variance: dict[str, Any] | None = None
    correlation: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append({"name": name, "passed": bool(passed), "detail": detail})

    def as_dict(self) -> dict[str, Any]:
        r = self.recipe
        return {
            "recipe": str(r.path),
            "config": str(r.config) if r.config is not None else None,
            "config_from": r.config_from,
            "num_generations": r.num_generations,
            "merged": r.merged,  # a reward listed more than once -> its entries' weights; it counts with their sum
            "rows": self.rows,
            "gold": self.gold_from,
            "passed": self.passed,
            "checks": self.checks,
            "rewards": self.rewards,
            "probes": self.probes,
            "zero_variance": self.zero_variance,
            "correlation": self.correlation,
        }


def lint_recipe(
    recipe: str | Path | Recipe, dataset: str | Path, sft: str | Path | None = None, opts: Options = Options()
) -> RecipeLint:
    from rewardkit.rewards import EPISODE_REWARDS
    from rewardkit.rewards.answers import load_schema

    if not 0 <= opts.margin <= 1:
        raise RecipeError(f"--margin {opts.margin:g}: lint RECIPE's margin is a share of the weights' sum, 0 to 1")
    spec = recipe if isinstance(recipe, Recipe) else read_recipe(recipe, opts.config)
    rewards, cfg = build_rewards(spec)
    weights = dict(zip(spec.keys, spec.weights, strict=True))
    tool_use = any(k in EPISODE_REWARDS for k in spec.keys)
    schema = load_schema(cfg.schema, cfg.schema_keys)
    rows, gold_from = with_gold(
        read_rows(dataset, "--dataset"), tool_use=tool_use, schema=schema, where=f"--dataset {dataset}"
    )
    out = RecipeLint(spec, len(rows), gold_from)

    # Sample 0..n-1: the golds; then each probe of each row; then the SFT samples.
    samples: list[dict[str, Any]] = list(rows)
    labels = [f"row {i + 1} gold" for i in range(len(rows))]
    probe_index = _add_probes(rows, tool_use, samples, labels, dataset)
    groups = [] if sft is None else _add_sft(sft, opts, tool_use, spec.num_generations, samples, labels)
    cells = score_all(rewards, samples)

    for key in spec.keys:
        _reward_checks(out, key, weights[key], cells[key], labels, len(rows), opts.time_limit_s)

    for name, pairs in probe_index.items():
        _probe_check(out, name, cells, weights, pairs, opts.margin * spec.total_weight)

    if groups:
        zv = zero_variance(groups, cells, weights)
        out.zero_variance = zv
        if opts.max_zero_variance is not None:
            out.check(
                "zero_variance",
                zv["weighted"] <= opts.max_zero_variance,
                f"{zv['weighted']:.1%} of {zv['groups']} groups of {spec.num_generations} have zero variance "
                f"(limit {opts.max_zero_variance:.1%})",
            )
    # Over the SFT samples when there are some (what the policy writes), else over the golds and the probes.
    picked = [i for g in groups for i in g] or list(range(len(samples)))
    out.correlation = correlation({k: [c[i] for i in picked] for k, c in cells.items()})
    return out


def _add_sft(
    sft: str | Path, opts: Options, tool_use: bool, num_generations: int, samples: list[Any], labels: list[str]
) -> list[list[int]]:
    """Append the SFT samples, grouped by prompt, to ``samples`` and ``labels``; each group's sample indices."""
    groups: list[list[int]] = []
    for group in expand(read_rows(sft, "--sft"), opts.group_by, tool_use, num_generations):
        groups.append(list(range(len(samples), len(samples) + len(group))))
        samples.extend(group)
        labels += [f"--sft group {len(groups)} sample {j + 1}" for j in range(len(group))]
    if not groups:
        by = f"--group-by {opts.group_by}" if opts.group_by else "every column but the completion"
        raise RecipeError(
            f"--sft {sft}: no prompt has 2 or more samples (grouped by {by}); pass --group-by COLUMN naming "
            "the column that holds the prompt, or give each prompt's samples as one row's 'completions' list"
        )
    return groups


def _reward_checks(
    out: RecipeLint, key: str, weight: float, cells: Sequence[Cell], labels: list[str], golds: int, time_limit_s: float
) -> None:
    """One reward's rates over every sample (the first ``golds`` are the golds), and its error, NaN and latency
    checks."""
    stats = rates(cells, labels)
    gold = [cells[i].number() for i in range(golds)]
    out.rewards[key] = {"weight": weight, **stats, "gold_mean": sum(gold) / len(gold)}
    out.check(
        f"errors:{key}",
        stats["error_rate"] == 0,
        f"{stats['error_rate']:.1%} of {len(cells)} calls raised"
        + (f"; first: {stats['first_error']}" if stats["first_error"] else ""),
    )
    out.check(f"nan:{key}", stats["nan_rate"] == 0, f"{stats['nan_rate']:.1%} NaN or infinite")
    out.check(
        f"latency:{key}",
        stats["p99_ms"] <= time_limit_s * 1000,
        f"p99 {stats['p99_ms']:.2f} ms per completion (limit {time_limit_s * 1000:g} ms)",
    )


def _add_probes(
    rows: Sequence[Mapping[str, Any]], tool_use: bool, samples: list[Any], labels: list[str], dataset: str | Path
) -> dict[str, list[tuple[int, int]]]:
    """Append every probe of every row (the form probes and the content probes built across the rows) to
    ``samples`` and ``labels``; probe name -> its (gold sample, probe sample) pairs."""
    try:
        built_all = all_probes(rows, tool_use=tool_use)
    except Exception as exc:  # rows the probes cannot be built from are the dataset's fault
        raise NoGoldError(f"--dataset {dataset}: cannot build the gaming probes of its rows ({exc})") from exc
    index: dict[str, list[tuple[int, int]]] = {}
    for i, built in enumerate(built_all):
        for name, probe in built.items():
            index.setdefault(name, []).append((i, len(samples)))
            samples.append(probe)
            labels.append(f"row {i + 1} probe {name}")
    return index


def _probe_check(
    out: RecipeLint,
    name: str,
    cells: Mapping[str, Sequence[Any]],
    weights: Mapping[str, float],
    pairs: Sequence[tuple[int, int]],
    limit: float,
) -> None:
    """One probe against the gold under the weighted sum: a probe judged per row (:data:`PER_ROW`: the near misses,
    do_nothing) must score below the gold on every row where no reward raised; any other probe's mean must stay
    ``limit`` (margin x the weights' sum) below the gold's."""
    golds = [weighted(cells, weights, g) for g, _ in pairs]
    scored = [weighted(cells, weights, p) for _, p in pairs]
    gold_mean, probe_mean = sum(golds) / len(pairs), sum(scored) / len(pairs)
    gap = gold_mean - probe_mean
    per_row = name in PER_ROW
    # Rows where a reward raised on the gold or the probe say nothing of the probe (the errors check reports them).
    clean = [not any(cells[k][g].error or cells[k][p].error for k in weights) for g, p in pairs]
    unnoticed = sum(ok and not short_of_gold(g, p, None) for ok, g, p in zip(clean, golds, scored, strict=True))
    flagged = unnoticed > 0 if per_row else not short_of_gold(gold_mean, probe_mean, limit)
    through = _through(cells, weights, pairs)
    out.probes[name] = {
        "rows": len(pairs),
        "gold": gold_mean,
        "probe": probe_mean,
        "gap": gap,
        "near_miss": name in NEAR_MISS,
        "not_below_gold": unnoticed,
        "flagged": flagged,
        "let_through_by": through,
    }
    named = ", ".join(f"{k} ({n} of {len(pairs)} rows)" for k, n in through.items())
    who = f"; let through by {named}" if through else ""
    rule = f"not below the gold on {unnoticed} of {len(pairs)} rows" if per_row else f"margin {limit:.3f}"
    out.check(
        f"probe:{name}",
        not flagged,
        f"probe {name} scores {probe_mean:.3f} against the gold's {gold_mean:.3f} (gap {gap:.3f}, {rule}){who}",
    )


def _through(
    cells: Mapping[str, Sequence[Any]], weights: Mapping[str, float], pairs: Sequence[tuple[int, int]]
) -> dict[str, int]:
    """Reward (weight > 0) -> the rows on which it scores the probe at least as high as the gold, most first."""
    keys = [k for k, w in weights.items() if w > 0]
    counts = {k: sum(cells[k][p].number() >= cells[k][g].number() for g, p in pairs) for k in keys}
    return dict(sorted(((k, n) for k, n in counts.items() if n), key=lambda kn: -kn[1]))
