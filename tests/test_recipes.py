"""Every recipe key must be an argument the pinned ms-swift accepts for its command."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from rewardkit.recipes import CATALOG, ROOT, RecipeFile
from rewardkit.rewards import PLANNING_REWARDS, REWARDS
from rewardkit.rewards._config import load_config

REPO = ROOT.parent
FILES = [f for files in CATALOG.values() for f in files]


def swift_fields(command: str) -> set[str]:
    from swift.arguments import RLHFArguments, RolloutArguments, SftArguments

    cls = {"sft": SftArguments, "rlhf": RLHFArguments, "rollout": RolloutArguments}[command]
    return {f.name for f in dataclasses.fields(cls)}


def test_catalogue_covers_every_yaml() -> None:
    on_disk = {str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.yaml")}
    assert on_disk == {f.name for f in FILES}


@pytest.mark.parametrize("recipe", [f for f in FILES if f.command != "rewardkit"], ids=lambda f: f.name)
def test_keys_are_swift_arguments(recipe: RecipeFile) -> None:
    config = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    config.pop("ENV", None)  # consumed by `swift` itself
    unknown = sorted(set(config) - swift_fields(recipe.command))
    assert not unknown, f"{recipe.name}: not `swift {recipe.command}` arguments: {unknown}"
    for key, value in config.items():
        # ms-swift 4.4 hands YAML list items to its subprocess verbatim: they must be strings.
        if isinstance(value, list):
            assert all(isinstance(v, str) for v in value), f"{recipe.name}: {key} items must be quoted strings"


@pytest.mark.parametrize("recipe", [f for f in FILES if f.command == "rlhf"], ids=lambda f: f.name)
def test_grpo_recipes_wire_rewards(recipe: RecipeFile) -> None:
    config = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    assert config["rlhf_type"] == "grpo"
    assert set(config["reward_funcs"]) <= set(REWARDS)
    assert len(config["reward_weights"]) == len(config["reward_funcs"])
    plugins = config["external_plugins"]
    assert all((REPO / p).is_file() for p in ([plugins] if isinstance(plugins, str) else plugins))
    env_config = config.get("ENV", {}).get("REWARDKIT_CONFIG")
    if set(config["reward_funcs"]) & set(PLANNING_REWARDS):  # only the planning rewards read a config
        assert env_config and (REPO / env_config).is_file()


def test_planner_weights_in_the_seven_reward_recipes() -> None:
    for name in ("rewards.yaml", "grpo.yaml", "grpo_zero3.yaml", "grpo_server.yaml"):
        config = yaml.safe_load((ROOT / "planning" / name).read_text(encoding="utf-8"))
        assert [float(w) for w in config["reward_weights"]] == [0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.1], name


@pytest.mark.parametrize("recipe", [f for f in FILES if f.command == "rewardkit"], ids=lambda f: f.name)
def test_reward_configs_validate(recipe: RecipeFile) -> None:
    from rewardkit.plugins.rollout.config import load_rollout_limits
    from rewardkit.plugins.user_sim import load_user_sim_config

    load_config(path=ROOT / recipe.name)
    raw = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    load_user_sim_config(raw.get("user_sim"), recipe.name)
    load_rollout_limits(raw.get("rollout"), recipe.name)


@pytest.mark.parametrize("recipe", [f for f in FILES if "multiturn" in f.name], ids=lambda f: f.name)
def test_multi_turn_recipes_load_the_scheduler(recipe: RecipeFile) -> None:
    config = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    assert config["multi_turn_scheduler"] == "tau2_user" and "plugins/tau2_user.py" in config["external_plugins"]
    assert config["reward_funcs"][0] == "task_completion" and float(config["reward_weights"][0]) == 1.0


def test_recipe_path_names_the_available_files() -> None:
    from rewardkit.recipes import recipe_path

    with pytest.raises(FileNotFoundError, match=r"planning/sft\.yaml"):
        recipe_path("planning/nope.yaml")
    assert recipe_path("planning/sft.yaml") == Path(ROOT / "planning/sft.yaml")
