"""Paired evaluation: common random numbers per (task, trial), batched generation, identical weights, same episodes.

`rewardkit eval agent` on a local checkpoint runs its episodes in lockstep cohorts (rewardkit.loop.lockstep) and
samples with a seed per (task, trial, turn) (rewardkit.loop.sampling). Two models with the same weights (SFT and
its lr-1e-12 control) then play the same episodes token for token, so their paired difference is exactly 0 in
every episode, and a real difference between two models is not buried under sampling noise.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from _tiny_agent import OPEN_TASK, TASK

from rewardkit.loop.lockstep import episode_seed, turn_seed
from rewardkit.runs.episodes.evaluation import evaluate_run
from rewardkit.runs.episodes.spec import RunSpec


def test_seeds_are_per_task_trial_and_turn_and_stable() -> None:
    seeds = {episode_seed(t, k) for t in ("0", "10") for k in range(3)}
    assert len(seeds) == 6  # 2 tasks x 3 trials, all different
    assert episode_seed("0", 1) == episode_seed("0", 1)  # the same in every process (no salted hash)
    assert turn_seed(episode_seed("0", 1), 0) != turn_seed(episode_seed("0", 1), 1)


def _episodes(model: Path, out: Path, workers: int) -> dict[tuple[str, int], list[dict]]:
    spec = RunSpec(
        domain="retail",
        agent=str(model),
        user="scripted",
        split="train",
        tasks=(OPEN_TASK, TASK),
        trials=3,
        temperature=1.0,
        max_tokens=48,
        max_turns=3,
        workers=workers,
        tools=False,
    )
    evaluate_run(spec, out, progress=False)
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {(r["task_id"], r["trial"]): r for r in records}


def test_identical_weights_play_identical_episodes(tiny_agent_model: Path, tmp_path: Path) -> None:
    control = shutil.copytree(tiny_agent_model, tmp_path / "control")  # the lr-1e-12 control: the same weights
    sft = _episodes(tiny_agent_model, tmp_path / "sft", workers=4)  # cohorts of 4: 2 tasks x 3 trials in 2 rounds
    ctl = _episodes(control, tmp_path / "control_eval", workers=4)
    assert sorted(sft) == sorted(ctl) == [(t, k) for t in sorted((OPEN_TASK, TASK)) for k in range(3)]
    for key in sft:  # token for token, and so reward for reward: the paired difference is 0 in every episode
        assert sft[key]["messages"] == ctl[key]["messages"], key
        assert sft[key]["reward"] == ctl[key]["reward"], key
    # The trials of one task are seeded apart: sampling at temperature 1 does not replay one episode three times.
    first = [json.dumps(sft[OPEN_TASK, k]["messages"][2:]) for k in range(3)]
    assert len(set(first)) > 1
