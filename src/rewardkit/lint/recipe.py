"""Reading what a GRPO recipe trains with: its reward keys, weights, ``num_generations`` and reward config.

The config is found as a ``swift rlhf`` run of the recipe would find it: ``--config`` first, then
``$REWARDKIT_CONFIG`` (ms-swift keeps a variable that is already set over the recipe's ``ENV:`` block), then the
recipe's ``ENV: REWARDKIT_CONFIG``. A relative path is taken from the working directory, as ``swift`` takes it
(the recipes say: run from the repository root); failing that, from the recipe's folder and each folder above it,
so ``recipes/planning/tiny_grpo.yaml`` finds ``recipes/planning/tiny_reward_config.yaml`` from anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rewardkit.config import ENV_VAR
from rewardkit.recipes.schedule import DEFAULT_GENERATIONS


class RecipeError(ValueError):
    """The recipe cannot be linted: not found, not YAML, no rewards, an unknown key (a usage error: exit 2)."""


@dataclass(frozen=True)
class Recipe:
    path: Path
    keys: tuple[str, ...]  # reward_funcs, in order
    weights: tuple[float, ...]  # reward_weights (1.0 each when the recipe has none, as ms-swift)
    num_generations: int
    config: Path | None  # the reward config file, or None: every key at its default
    config_from: str  # "--config", "$REWARDKIT_CONFIG", "the recipe's ENV", or "defaults"

    @property
    def total_weight(self) -> float:
        return sum(self.weights)


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
    raw_weights = _as_list(data.get("reward_weights")) or [1.0] * len(keys)
    try:
        weights = tuple(float(w) for w in raw_weights)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"{path}: reward_weights must be numbers; got {raw_weights}") from exc
    if len(weights) != len(keys):
        raise RecipeError(f"{path}: {len(keys)} reward_funcs but {len(weights)} reward_weights")
    raw = data.get("num_generations", DEFAULT_GENERATIONS)
    try:  # a string of digits too: ms-swift parses the YAML's values as its command line's
        generations = int(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else 0
    except ValueError:
        generations = 0
    if generations < 2:  # ms-swift: "num_generations must be greater than 1 for GRPO"
        raise RecipeError(f"{path}: num_generations must be an integer greater than 1 for GRPO; got {raw!r}")
    env = data.get("ENV") if isinstance(data.get("ENV"), Mapping) else {}
    found, source = find_config(path, env, config)
    return Recipe(path, tuple(keys), weights, generations, found, source)


def build_rewards(recipe: Recipe) -> tuple[dict[str, Any], Any]:
    """Key -> reward instance, built as ms-swift builds them but with the recipe's config; and that config."""
    from rewardkit.rewards import REWARDS
    from rewardkit.rewards.config import load_config

    cfg = load_config(path=recipe.config) if recipe.config is not None else load_config({})
    out = {}
    for key in recipe.keys:
        cls = REWARDS[key]
        out[key] = cls(config=cfg) if "config" in cls.accepted_keywords() else cls()
    return out, cfg
