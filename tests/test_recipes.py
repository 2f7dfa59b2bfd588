"""Every recipe key must be an argument the pinned ms-swift accepts for its command."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from rewardkit.recipes import CATALOG, ROOT, RecipeFile, compose
from rewardkit.rewards import PLANNER_WEIGHTS, PLANNING_REWARDS, REWARDS
from rewardkit.rewards.config import load_config
from rewardkit.rewards.sets import PLANNER, SETS, RewardSet

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


RLHF = [f for f in FILES if f.command == "rlhf"]


def test_every_grpo_recipe_names_a_reward_set() -> None:
    # Every rlhf recipe trains with one declared set; no other recipe claims one.
    assert all(f.reward_set in SETS for f in RLHF), {f.name: f.reward_set for f in RLHF}
    assert all(f.reward_set is None for f in FILES if f.command != "rlhf")
    assert {f.reward_set for f in RLHF} == set(SETS)  # no declared set is left without a recipe


@pytest.mark.parametrize("recipe", RLHF, ids=lambda f: f.name)
def test_recipe_trains_with_its_reward_set(recipe: RecipeFile) -> None:
    # Read the YAML as ms-swift does and compare it with the declared set: keys, order and weights.
    config = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    reward_set = SETS[recipe.reward_set]
    assert config["reward_funcs"] == list(reward_set.keys), recipe.name
    assert [float(w) for w in config["reward_weights"]] == list(reward_set.weights.values()), recipe.name


@pytest.mark.parametrize("recipe", RLHF, ids=lambda f: f.name)
def test_recipe_is_what_the_generator_writes(recipe: RecipeFile) -> None:
    text = (ROOT / recipe.name).read_text(encoding="utf-8")
    assert compose.render(text, SETS[recipe.reward_set], recipe.name) == text, (
        f"{recipe.name} differs from reward set {recipe.reward_set!r}: {compose.WRITE_HINT}"
    )


def test_compose_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A copy of the recipes with one weight changed by hand: --check names it and fails, --write restores it.
    for sub in ("planning", "agent"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    assert compose.main(["--check", "--root", str(tmp_path)]) == 0
    grpo = tmp_path / "planning" / "grpo.yaml"
    original = grpo.read_text(encoding="utf-8")
    grpo.write_text(original.replace('"0.2", "0.3"', '"0.3", "0.2"'), encoding="utf-8")
    capsys.readouterr()
    assert compose.main(["--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "planning/grpo.yaml" in err and compose.WRITE_HINT in err and "grpo_zero3" not in err
    assert compose.main(["--write", "--root", str(tmp_path)]) == 0
    assert grpo.read_text(encoding="utf-8") == original
    assert compose.stale(tmp_path) == {}


def test_render_keeps_every_other_line() -> None:
    text = (
        "# head\n"
        "rlhf_type: grpo   # kept\n"
        "reward_funcs:   # block list, indent 4\n"
        "    - a\n"
        "    - b\n"
        "# between\n"
        "reward_weights: ['9', '9']    # trailing, kept\n"
        "beta: 0.04\n"
    )
    out = compose.render(text, SETS["agent_multi_turn"])
    assert out == (
        "# head\n"
        "rlhf_type: grpo   # kept\n"
        f"{compose.MARKER.format(name='agent_multi_turn')}\n"
        "reward_funcs:   # block list, indent 4\n"
        "    - task_completion\n"
        "    - task_completion_rate\n"
        "    - user_sim_failure\n"
        "# between\n"
        'reward_weights: ["1", "0", "0"]    # trailing, kept\n'
        "beta: 0.04\n"
    )
    # Idempotent, and switching sets replaces the marker rather than adding a second one.
    assert compose.render(out, SETS["agent_multi_turn"]) == out
    assert compose.render(out, SETS["agent"]).count("# Generated from reward set") == 1


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("reward_funcs: [a]\n", "no top-level reward_weights"),
        ("reward_funcs: [a]\nreward_weights: ['1']\nreward_funcs: [b]\n", "appears twice"),
        ("reward_funcs:\n  - a\n  # why\n  - b\nreward_weights: ['1']\n", "comment inside reward_funcs"),
        ("reward_funcs: [a,\n  b]\nreward_weights: ['1']\n", "spans several lines"),
    ],
)
def test_render_refuses_what_it_cannot_rewrite_safely(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compose.render(text, SETS["agent"])


def test_planner_weights_is_the_planner_set() -> None:
    # The scoring CLI and the tests read PLANNER_WEIGHTS; it is the declared set, a plain copy of it.
    assert dict(PLANNER.weights) == PLANNER_WEIGHTS and list(PLANNER_WEIGHTS) == list(PLANNER.keys)
    assert type(PLANNER_WEIGHTS) is dict and PLANNER_WEIGHTS is not PLANNER.weights
    assert list(PLANNER_WEIGHTS) == [k for k in REWARDS if k in PLANNER_WEIGHTS]  # REWARDS order


@pytest.mark.parametrize("reward_set", list(SETS.values()), ids=lambda s: s.name)
def test_reward_sets_name_registered_rewards(reward_set: RewardSet) -> None:
    assert set(reward_set.keys) <= set(REWARDS), reward_set.name
    assert [float(w) for w in reward_set.yaml_weights()] == list(reward_set.weights.values())


@pytest.mark.parametrize("recipe", [f for f in FILES if f.command == "rewardkit"], ids=lambda f: f.name)
def test_reward_configs_validate(recipe: RecipeFile) -> None:
    from rewardkit.loop.config import load_run_config

    load_config(path=ROOT / recipe.name)
    load_run_config(path=ROOT / recipe.name)  # the whole file, user_sim and rollout included


@pytest.mark.parametrize("recipe", [f for f in FILES if "multiturn" in f.name], ids=lambda f: f.name)
def test_multi_turn_recipes_load_the_scheduler(recipe: RecipeFile) -> None:
    config = yaml.safe_load((ROOT / recipe.name).read_text(encoding="utf-8"))
    assert (
        config["multi_turn_scheduler"] == "simulated_user" and "plugins/simulated_user.py" in config["external_plugins"]
    )
    assert recipe.reward_set == "agent_multi_turn"  # its rewards and weights: test_recipe_trains_with_its_reward_set


def test_recipe_path_names_the_available_files() -> None:
    from rewardkit.recipes import recipe_path

    with pytest.raises(FileNotFoundError, match=r"planning/sft\.yaml"):
        recipe_path("planning/nope.yaml")
    assert recipe_path("planning/sft.yaml") == Path(ROOT / "planning/sft.yaml")
