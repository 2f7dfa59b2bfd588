"""Reading what a GRPO recipe trains with: its reward keys, weights, ``num_generations`` and reward config.

The config is found as a ``swift rlhf`` run of the recipe would find it: ``--config`` first, then
``$REWARDKIT_CONFIG`` (ms-swift keeps a variable that is already set over the recipe's ``ENV:`` block), then the
recipe's ``ENV: REWARDKIT_CONFIG``. A relative path is taken from the working directory, as ``swift`` takes it
(the recipes say: run from the repository root); failing that, from the recipe's folder and each folder above it,
so ``recipes/planning/tiny_grpo.yaml`` finds ``recipes/planning/tiny_reward_config.yaml`` from anywhere.

``reward_weights`` are read as ms-swift reads them (a number, or a string of one), one per ``reward_funcs`` entry,
each a finite number within :data:`MAX_WEIGHT`, not all 0. ms-swift calls a reward listed twice twice and adds
both weighted scores: :class:`Recipe` keeps the entries and counts each reward once, with their weights' sum.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rewardkit.config import ENV_VAR
from rewardkit.errors import UserError
from rewardkit.files.jsonl import kind
from rewardkit.recipes.schedule import DEFAULT_GENERATIONS
from rewardkit.runs.training.audit import MAX_WEIGHT


class RecipeError(UserError, ValueError):
    """The recipe cannot be linted: not found, not YAML, no rewards, an unknown key, a weight that means nothing
    (a usage error: exit 2)."""


@dataclass(frozen=True)
class Recipe:
    path: Path
    reward_funcs: tuple[str, ...]  # as the recipe lists them: ms-swift calls every entry, a repeated one too
    reward_weights: tuple[float, ...]  # one per entry (1.0 each when the recipe has none, as ms-swift)
    num_generations: int
    config: Path | None  # the reward config file, or None: every key at its default
    config_from: str  # "--config", "$REWARDKIT_CONFIG", "the recipe's ENV", or "defaults"

    def entries(self) -> dict[str, list[float]]:
        """Each distinct reward, in the order of its first entry -> the weights of its entries, in order."""
        out: dict[str, list[float]] = {}
        for key, weight in zip(self.reward_funcs, self.reward_weights, strict=True):
            out.setdefault(key, []).append(weight)
        return out

    @property
    def keys(self) -> tuple[str, ...]:
        """The distinct rewards, in the order of their first entry."""
        return tuple(self.entries())

    @property
    def weights(self) -> tuple[float, ...]:
        """Each of :attr:`keys`' weight: the sum of its entries' weights. ms-swift adds w_i x s over the entries,
        and the same reward scores a completion the same each time: (sum of w_i) x s."""
        return tuple(sum(ws) for ws in self.entries().values())

    @property
    def merged(self) -> dict[str, list[float]]:
        """Each reward listed more than once -> its entries' weights (its weight is their sum)."""
        return {k: ws for k, ws in self.entries().items() if len(ws) > 1}

    @property
    def total_weight(self) -> float:
        """The sum of every entry's weight, as ms-swift's weights add up."""
        return sum(self.reward_weights)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    return list(value) if isinstance(value, list | tuple) else [value]


def _search(name: str, recipe: Path) -> list[Path]:
    """Where a reward config ``name`` is looked for, in order: as it is (an absolute path, or from the working
    directory), then from the recipe's folder and each folder above it."""
    path = Path(name)
    if path.is_absolute():
        return [path]
    tried = [path, *(folder / path for folder in (recipe.parent, *recipe.parent.parents))]
    seen: dict[Path, Path] = {}
    for candidate in tried:  # a relative recipe's folders end at the working directory: name each place once
        seen.setdefault(candidate.absolute(), candidate)
    return list(seen.values())


def find_config(recipe: Path, env_block: Mapping[str, Any], given: str | None) -> tuple[Path | None, str]:
    """The reward config a run of ``recipe`` would read, and what named it."""
    for value, source in (
        (given, "--config"),
        (os.environ.get(ENV_VAR) or None, f"${ENV_VAR}"),
        (env_block.get(ENV_VAR), "the recipe's ENV"),
    ):
        if value:
            tried = _search(str(value), recipe)
            found = next((p for p in tried if p.is_file()), None)
            if found is None:
                where = ", ".join(str(p) for p in tried)
                raise RecipeError(f"{source}: reward config {value} not found (from {Path.cwd()}, tried {where})")
            return found, source
    return None, "defaults"


_BOUNDS = f"from -{MAX_WEIGHT:,.0f} to {MAX_WEIGHT:,.0f}"


def _weight(path: Path, i: int, key: str, value: Any) -> float:
    """``reward_weights[i]``, the weight of ``key``, as ms-swift reads it (a number, or a string of one: its
    command line's ``float``), checked: a finite number within :data:`MAX_WEIGHT`; a boolean is not a number."""
    why, number = "", 0.0
    if isinstance(value, bool):
        why = "not a number"
    else:
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float
            why = f"not {_BOUNDS}"
        except (TypeError, ValueError):
            why = "not a number"
        else:
            if not math.isfinite(number):
                why = "not a finite number"
            elif abs(number) > MAX_WEIGHT:
                why = f"not {_BOUNDS}"
    if why:
        raise RecipeError(
            f"{path}: reward_weights[{i}] (the weight of {key}) is {kind(value)}, {why}; give each weight as a "
            f"finite number {_BOUNDS} (so that weight x score and their sum stay finite), one per reward_funcs entry"
        )
    return number


def read_weights(path: Path, keys: list[str], raw: list[Any]) -> tuple[float, ...]:
    """One checked weight per ``reward_funcs`` entry; 1.0 each when the recipe gives none, as ms-swift."""
    if not raw:
        return (1.0,) * len(keys)
    if len(raw) != len(keys):
        raise RecipeError(f"{path}: {len(keys)} reward_funcs but {len(raw)} reward_weights")
    return tuple(_weight(path, i, key, value) for i, (key, value) in enumerate(zip(keys, raw, strict=True)))


def read_recipe(path: str | Path, config: str | None = None) -> Recipe:
    """The recipe's reward set; every key must be one of rewardkit's rewards (``rewardkit rewards``)."""
    from rewardkit.rewards import REWARDS

    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RecipeError(f"{path}: not a YAML recipe ({str(exc).splitlines()[0]})") from exc
    if not isinstance(data, Mapping):
        raise RecipeError(f"{path}: not a YAML mapping of ms-swift arguments")
    keys = [str(k) for k in _as_list(data.get("reward_funcs"))]
    if not keys:
        raise RecipeError(f"{path}: no reward_funcs; lint RECIPE needs a GRPO recipe with rewards")
    unknown = [k for k in keys if k not in REWARDS]
    if unknown:
        raise RecipeError(f"{path}: reward_funcs {unknown} are not rewardkit rewards; known: {', '.join(REWARDS)}")
    weights = read_weights(path, keys, _as_list(data.get("reward_weights")))
    raw = data.get("num_generations", DEFAULT_GENERATIONS)
    try:  # a string of digits too: ms-swift parses the YAML's values as its command line's
        generations = int(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else 0
    except ValueError:
        generations = 0
    if generations < 2:  # ms-swift: "num_generations must be greater than 1 for GRPO"
        raise RecipeError(f"{path}: num_generations must be an integer greater than 1 for GRPO; got {raw!r}")
    env = data.get("ENV") if isinstance(data.get("ENV"), Mapping) else {}
    found, source = find_config(path, env, config)
    recipe = Recipe(path, tuple(keys), weights, generations, found, source)
    if not any(recipe.weights):
        added = f" once the weights of a repeated reward are added up ({recipe.merged})" if recipe.merged else ""
        raise RecipeError(
            f"{path}: reward_weights give every reward a weight of 0{added}, so GRPO would train nothing; "
            "give at least one reward a weight other than 0"
        )
    if recipe.total_weight <= 0:
        raise RecipeError(
            f"{path}: reward_weights sum to {recipe.total_weight:g}; lint RECIPE holds each probe a margin x that "
            "sum below the gold, which needs a positive sum (a set with every weight negated, as in a sign test, "
            "ranks the probes above the gold by design): lint the set you train with"
        )
    return recipe


def build_rewards(recipe: Recipe) -> tuple[dict[str, Any], Any]:
    """Key -> reward instance, built as ms-swift builds them but with the recipe's config; and that config."""
    from rewardkit.rewards.registry import REWARDS, config_schema

    cfg = config_schema().load(path=recipe.config) if recipe.config is not None else config_schema().load({})
    if cfg.domain is not None:  # the config's domain, loaded as a `swift rlhf` process loads it: rows may name it
        from rewardkit.envs.registry import load_configured

        load_configured(cfg.domain, str(recipe.config))
    out = {}
    for key in recipe.keys:  # one instance per distinct reward: a repeated entry is the same reward
        cls = REWARDS[key]
        out[key] = cls(config=cfg) if "config" in cls.accepted_keywords() else cls()
    return out, cfg
