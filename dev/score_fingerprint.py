"""Every reward's scores on the benchmark batches, as one SHA-256: run it before and after a change that must not
move a score, and compare the two lines.

    python dev/score_fingerprint.py          # prints: <number of scores> <sha256>

The batches: the reward-stack benchmark's three planning batches (1,024 completions each: two rollouts to an answer,
every answer its own rewrite, every answer its own plan), each also with its golds shifted by one row and with a
perturbed copy of its completions, under every planning reward; and 64 tau2 retail episodes of the tasks they score
(the gold's calls then its outputs, the same without the outputs, and with hand-made ``rollout_infos``) under every
episode reward.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_reward_stack import batch  # noqa: E402
from bench_task_completion import trajectory  # noqa: E402

from rewardkit.envs.retail.domain import tasks  # noqa: E402
from rewardkit.envs.task_verdict import checked_task  # noqa: E402
from rewardkit.envs.tasks import TaskError  # noqa: E402
from rewardkit.rewards import REWARDS  # noqa: E402

SHAPES = {"two_to_an_answer": (2, False), "own_rewrite": (1, False), "own_plan": (1, True)}
ENDINGS = ("user_stop", "max_turns", "user_sim_error")


def rotated(values: list[Any]) -> list[Any]:
    return values[1:] + values[:1]


def perturbed(completions: list[str]) -> list[str]:
    """A space inside an expert's name in every third completion, a few characters cut off the others."""
    return [c.replace("专家", "专 家", 1) if i % 3 == 0 else c[: len(c) - (i % 7)] for i, c in enumerate(completions)]


def planning_scores() -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = [key for key, cls in REWARDS.items() if "messages" not in cls.columns]
    for name, (per_answer, steps) in SHAPES.items():
        completions, columns = batch(1024, per_answer, steps)
        shifted = {column: rotated(values) for column, values in columns.items()}
        cases = {
            "gold": (completions, columns),
            "shifted": (completions, shifted),
            "perturbed": (perturbed(completions), columns),
        }
        for key in keys:
            reward = REWARDS[key]()
            for case, (texts, cells) in cases.items():
                out[f"{name}/{case}/{key}"] = reward(texts, **cells)
    return out


def playable(task: dict[str, Any]) -> bool:
    """A task the episode rewards score (tau2 keeps a few they refuse: a gold that fails, or that shows nothing)."""
    try:
        checked_task(task, "task", "retail")
    except TaskError:
        return False
    return True


def episode_scores() -> dict[str, Any]:
    out: dict[str, Any] = {}
    every = [task for task in tasks().values() if playable(task)]
    chosen = [every[i % len(every)] for i in range(64)]
    whole = [trajectory(task) for task in chosen]
    infos = [None if i % 4 == 0 else {"termination": ENDINGS[i % 3], "agent_said": ["ok"]} for i in range(64)]
    cases = {"whole": (whole, None), "silent": ([m[:-1] for m in whole], None), "infos": (whole, infos)}
    for key, cls in REWARDS.items():
        if "messages" not in cls.columns:
            continue
        for case, (messages, rollout_infos) in cases.items():
            cells: dict[str, Any] = {"messages": messages, "task": chosen, "domain": ["retail"] * 64}
            if rollout_infos is not None:
                cells["rollout_infos"] = rollout_infos
            out[f"tau2/{case}/{key}"] = cls()(["x"] * 64, **cells)
    return out


def main() -> None:
    scores = {**planning_scores(), **episode_scores()}
    count = sum(len(values) for values in scores.values())
    print(count, hashlib.sha256(json.dumps(scores, sort_keys=True).encode()).hexdigest())


if __name__ == "__main__":
    main()
