"""How many prompts a GRPO recipe trains on per optimizer step, and how many steps it runs, from its own keys.

ms-swift (as TRL) samples ``generation_batch_size = per_device_train_batch_size * GPUs * steps_per_generation``
completions at a time (``steps_per_generation`` defaults to ``gradient_accumulation_steps``), that is
``/ num_generations`` prompts, drawn by TRL's ``RepeatSampler``, which keeps only *full* batches of prompts.
Each optimizer step uses one accumulation's worth: ``per_device * GPUs * accumulation / num_generations``
prompts. So one epoch over ``rows`` prompts is ``floor(rows / prompts_per_step) * num_iterations`` optimizer
steps, and ``max_steps``, when set, overrides the epochs.

Each GRPO recipe states what it assumes in one comment line that :func:`claimed` reads, e.g.::

    # Batch: 4 GPUs x 8 per device x 8 accumulation = 256 completions = 32 prompts per step; 73 tasks ->
    50 optimizer steps (on one line)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CLAIM = re.compile(
    r"^# Batch: (?P<gpus>\d+) (?:GPUs?|CPU) x (?P<per_device>\d+) per device x (?P<accumulation>\d+) accumulation"
    r" = (?P<completions>\d+) completions = (?P<prompts_per_step>\d+) prompts per step;"
    r" (?P<rows>\d+) (?:rows|tasks) -> (?P<optimizer_steps>\d+) optimizer steps",
    re.MULTILINE,
)
DEFAULT_GENERATIONS = 8  # ms-swift's default num_generations, for a recipe that sets none


def grpo_schedule(config: Mapping[str, Any], gpus: int, rows: int) -> dict[str, int]:
    """The batch and the length of a GRPO run of ``config`` (a recipe's keys) on ``gpus`` devices and
    ``rows`` prompts, computed as ms-swift computes them."""
    per_device = int(config.get("per_device_train_batch_size", 8))
    accumulation = int(config.get("gradient_accumulation_steps", 1))
    generations = int(config.get("num_generations", DEFAULT_GENERATIONS))
    completions = per_device * gpus * accumulation
    if completions % generations:
        raise ValueError(
            f"per_device_train_batch_size x GPUs x gradient_accumulation_steps = {completions} "
            f"completions is not a multiple of num_generations = {generations}"
        )
    prompts_per_step = completions // generations
    steps_per_epoch = rows // prompts_per_step * int(config.get("num_iterations", 1))
    max_steps = int(config.get("max_steps", -1))
    epochs = float(config.get("num_train_epochs", 3))  # transformers' default
    steps = max_steps if max_steps > 0 else int(steps_per_epoch * epochs)
    return {
        "gpus": gpus,
        "per_device": per_device,
        "accumulation": accumulation,
        "completions": completions,
        "prompts_per_step": prompts_per_step,
        "rows": rows,
        "steps_per_epoch": steps_per_epoch,
        "optimizer_steps": steps,
    }


def claimed(text: str) -> dict[str, int] | None:
    """The numbers of a recipe's ``# Batch:`` comment, or None when it has none."""
    match = CLAIM.search(text)
    return {k: int(v) for k, v in match.groupdict().items()} if match else None
