"""Trying GRPO's levers one at a time: a lever's overrides as ``swift rlhf`` flags, and what its run did.

A lever is a set of overrides of a chain's GRPO recipe, trained from the chain's SFT checkpoint with a checkpoint
(and a logged completion table) after every step, so that :func:`training_record` can run the step check on it.
The evaluation that decides between levers is each chain's own (``experiments/agent_levers.py``,
``experiments/planner_levers.py``), on the training split only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.pipelines.chain import swift_flags
from rewardkit.pipelines.grpo_log import grpo_steps, summarize_steps

STEP_CHECK_FLAGS = ("--save_steps", "1", "--logging_steps", "1")  # the step check's checkpoints and tables


def lever_flags(overrides: Mapping[str, object]) -> list[str]:
    """``{"learning_rate": 1e-4}`` -> ``["--learning_rate", "0.0001"]``, then the step check's flags."""
    return [*swift_flags(overrides), *STEP_CHECK_FLAGS]


def sampling_key(params: Mapping[str, float]) -> str:
    """``{"temperature": 1.0, "top_k": 50}`` -> ``"temperature1_top_k50"``: one control evaluation per key."""
    return "_".join(f"{k}{v:g}" for k, v in params.items())


def training_record(run_dir: Path, rewards: Sequence[str]) -> dict[str, Any]:
    """A finished lever run: the rollouts' mean ``rewards`` (ms-swift's columns, ``reward`` the weighted total) in
    the first and last quarter of its steps, the mean share of groups with no reward variance (no gradient), and
    the step check's verdicts and mean update cosine."""
    from rewardkit.runs.training.audit import load_run
    from rewardkit.runs.training.step_check import step_check

    steps = summarize_steps(grpo_steps(run_dir / "logging.jsonl"))
    shares = [s for s in steps["zero_std_share"] if s is not None]
    check = step_check(load_run(run_dir))
    return {
        "rollouts_first_quarter": {r: steps["first_quarter"].get(r) for r in rewards},
        "rollouts_last_quarter": {r: steps["last_quarter"].get(r) for r in rewards},
        "zero_std_share": sum(shares) / len(shares) if shares else None,
        "step_check": {k: check[k] for k in ("reward", "logged", "momentum")},
    }
