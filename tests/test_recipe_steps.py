"""Every GRPO recipe's batch and length, computed from its own keys as ms-swift computes them, against the
``# Batch:`` line of its comment (the GPU count and dataset size it assumes, the prompts per step and the
optimizer steps it claims). A recipe that says "MUA-RL's setting" and trains 3 steps fails here."""

from __future__ import annotations

import pytest
import yaml

from rewardkit.recipes import CATALOG, recipe_path
from rewardkit.recipes.schedule import claimed, grpo_schedule

RLHF = {
    f.name: yaml.safe_load(recipe_path(f.name).read_text())
    for fs in CATALOG.values()
    for f in fs
    if f.command == "rlhf"
}
# A training recipe sets its batch; the rewards.yaml fragments carry only rewards, to combine with the user's.
GRPO = [
    name for name, keys in RLHF.items() if keys.get("rlhf_type") == "grpo" and "per_device_train_batch_size" in keys
]


def test_every_grpo_recipe_is_checked() -> None:
    # The catalogue's nine GRPO recipes: five planning (grpo, nothink, server, zero3, tiny), four agent.
    assert len(GRPO) == 9, GRPO
    assert sorted(set(RLHF) - set(GRPO)) == ["agent/rewards.yaml", "planning/rewards.yaml"]


@pytest.mark.parametrize("name", GRPO)
def test_the_recipe_trains_what_its_comment_claims(name: str) -> None:
    text = recipe_path(name).read_text(encoding="utf-8")
    claim = claimed(text)
    assert claim is not None, f"{name}: no '# Batch: ...' comment stating its GPUs, dataset size and steps"
    computed = grpo_schedule(yaml.safe_load(text), claim["gpus"], claim["rows"])
    assert {k: computed[k] for k in claim} == claim, name


@pytest.mark.parametrize(
    ("keys", "gpus", "rows", "prompts_per_step", "steps"),
    [
        # MUA-RL on 4 GPUs: 8 x 4 x 8 = 256 completions / 8 = 32 prompts; floor(73 / 32) = 2 steps x 25 epochs
        ({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 8, "num_train_epochs": 25}, 4, 73, 32, 50),
        # the same keys at 1 epoch: the 9 prompts of the last, partial batch are never drawn (RepeatSampler)
        ({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 8, "num_train_epochs": 1}, 4, 73, 32, 2),
        # max_steps wins over the epochs: 16 completions / 8 = 2 prompts per step, 20 steps
        ({"per_device_train_batch_size": 16, "max_steps": 20, "num_train_epochs": 9}, 1, 14, 2, 20),
        # num_iterations reuses each batch: floor(340 / 16) = 21 batches x 2 iterations = 42 steps
        (
            {
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 4,
                "num_train_epochs": 1,
                "num_iterations": 2,
            },
            8,
            340,
            16,
            42,
        ),
        # fewer prompts than one step needs: no step at all
        ({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 8, "num_train_epochs": 1}, 4, 31, 32, 0),
    ],
)
def test_the_schedule_arithmetic(keys: dict, gpus: int, rows: int, prompts_per_step: int, steps: int) -> None:
    schedule = grpo_schedule({"num_generations": 8, **keys}, gpus, rows)
    assert (schedule["prompts_per_step"], schedule["optimizer_steps"]) == (prompts_per_step, steps)


def test_a_batch_that_splits_a_group_is_refused() -> None:
    # 3 x 1 x 2 = 6 completions cannot hold whole groups of 4
    with pytest.raises(ValueError, match="6 completions is not a multiple of num_generations = 4"):
        grpo_schedule({"per_device_train_batch_size": 3, "gradient_accumulation_steps": 2, "num_generations": 4}, 1, 10)


def test_the_claimed_dataset_sizes_are_the_bundled_ones() -> None:
    from rewardkit.data_builders import InputSpec
    from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.recipes import EXAMPLES

    planning, _ = build_grpo([InputSpec(p, None) for p in sorted(EXAMPLES.glob("annotated_p*.jsonl"))], GrpoOptions())
    tau2, _ = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))
    # Every GRPO recipe trains on one of three: the planning rows, retail's multi-turn training rows, or the tiny
    # agent preset's tasks; the size each claims is that one's.
    sizes = {"planning": len(planning), "tau2": len(tau2), "tiny": len(AgentPipeline(Options()).train_tasks())}
    trains_on = {n: "planning" if n.startswith("planning/") else "tiny" if "/tiny" in n else "tau2" for n in GRPO}
    assert {n: claimed(recipe_path(n).read_text())["rows"] for n in GRPO} == {n: sizes[trains_on[n]] for n in GRPO}
