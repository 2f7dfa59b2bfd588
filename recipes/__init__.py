"""Native ms-swift YAML recipes shipped with rewardkit, and their catalogue.

Every YAML here is a plain ms-swift config (``swift sft FILE.yaml``); the
catalogue records which ``swift`` command reads each one, so the CLI can list
them and the tests can check every key against that command's arguments.

Every ``rlhf`` recipe also names its reward set (``rewardkit.rewards.sets``).
Its ``reward_funcs:`` and ``reward_weights:`` lines are generated from that set:
after changing a set, run ``python -m rewardkit.recipes.compose --write``
(:mod:`rewardkit.recipes.compose`); ``--check`` and the tests fail while a
recipe differs. ms-swift reads one self-contained YAML file per run (no
includes or overlays), so the recipes stay whole files.

Above the rewards (``compose`` reads the reward sets); see :mod:`rewardkit.layers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# A copy of examples/planning/*.jsonl shipped as package data: the demo, the default inputs of
# `recipe run planning` and the tiny model's tokenizer corpus must not depend on the cwd or a checkout.
EXAMPLES = ROOT / "planning" / "data"


@dataclass(frozen=True)
class RecipeFile:
    name: str  # path relative to recipes/
    command: str  # sft | rlhf | rollout | rewardkit (a $REWARDKIT_CONFIG file)
    summary: str
    reward_set: str | None = None  # rlhf only: a key of rewardkit.rewards.sets.SETS


CATALOG: dict[str, list[RecipeFile]] = {
    "planning": [
        RecipeFile("planning/sft.yaml", "sft", "SFT, LoRA: learn the think/answer format (8B-32B)"),
        RecipeFile("planning/sft_full.yaml", "sft", "SFT, full parameters, ZeRO-3"),
        RecipeFile(
            "planning/grpo.yaml", "rlhf", "GRPO with the seven rewards, one node, vLLM colocate", reward_set="planner"
        ),
        RecipeFile(
            "planning/grpo_nothink.yaml", "rlhf", "GRPO control run without <think>", reward_set="planner_no_think"
        ),
        RecipeFile(
            "planning/grpo_zero3.yaml",
            "rlhf",
            "GRPO, full parameters, DeepSpeed ZeRO-3, one node",
            reward_set="planner",
        ),
        RecipeFile(
            "planning/grpo_server.yaml", "rlhf", "GRPO trainer against a `swift rollout` server", reward_set="planner"
        ),
        RecipeFile("planning/rollout.yaml", "rollout", "vLLM rollout server for multi-node GRPO"),
        RecipeFile(
            "planning/rewards.yaml", "rlhf", "just the seven rewards and weights, to combine", reward_set="planner"
        ),
        RecipeFile("planning/tiny_sft.yaml", "sft", "CPU preset: SFT of the tiny local model"),
        RecipeFile("planning/tiny_grpo.yaml", "rlhf", "CPU preset: GRPO of the tiny local model", reward_set="planner"),
        RecipeFile("planning/reward_config.yaml", "rewardkit", "reward configuration (REWARDKIT_CONFIG)"),
        RecipeFile("planning/tiny_reward_config.yaml", "rewardkit", "reward configuration of the CPU preset"),
    ],
    "agent": [
        RecipeFile("agent/rewards.yaml", "rlhf", "just the agent rewards and weights, to combine", reward_set="agent"),
        RecipeFile(
            "agent/grpo_multiturn.yaml",
            "rlhf",
            "multi-turn GRPO with a simulated user (MUA-RL), vLLM colocate",
            reward_set="agent_multi_turn",
        ),
        RecipeFile(
            "agent/grpo_multiturn_server.yaml",
            "rlhf",
            "multi-turn GRPO against a `swift rollout` server",
            reward_set="agent_multi_turn",
        ),
        RecipeFile(
            "agent/tiny_multiturn.yaml",
            "rlhf",
            "CPU preset: multi-turn GRPO, tiny model, scripted user",
            reward_set="agent_multi_turn",
        ),
        RecipeFile("agent/cold_start_sft.yaml", "sft", "MUA-RL cold start: SFT on synthesised trajectories"),
        RecipeFile("agent/tiny_sft.yaml", "sft", "CPU preset of `recipe run agent`: cold-start SFT, tiny model"),
        RecipeFile(
            "agent/tiny_grpo.yaml",
            "rlhf",
            "CPU preset of `recipe run agent`: multi-turn GRPO after the cold start",
            reward_set="agent_multi_turn",
        ),
        RecipeFile("agent/mua_rl_config.yaml", "rewardkit", "REWARDKIT_CONFIG: LLM user simulator, MUA-RL reward"),
        RecipeFile("agent/tiny_config.yaml", "rewardkit", "REWARDKIT_CONFIG of the CPU preset: scripted user"),
    ],
}


def recipe_path(name: str) -> Path:
    """Path of a bundled recipe file such as ``planning/rewards.yaml``."""
    path = ROOT / name
    if not path.is_file():
        available = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.yaml"))
        raise FileNotFoundError(f"no recipe {name!r}; available: {available}")
    return path
