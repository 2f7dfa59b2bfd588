from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardkit.pipelines.grpo_log import grpo_steps, summarize_steps, think_lengths


def row(step: int, total: int, reward: float, expert: float) -> dict:
    return {"reward": reward, "rewards/ExpertMatch/mean": expert, "global_step/max_steps": f"{step}/{total}"}


def test_summarize_first_last_and_quarter_windows(tmp_path: Path) -> None:
    rows = [
        row(s, 8, r, e)
        for s, r, e in [
            (1, 0.2, 0.1),
            (2, 0.4, 0.3),
            (3, 0.5, 0.5),
            (4, 0.5, 0.5),
            (5, 0.6, 0.5),
            (6, 0.6, 0.5),
            (7, 0.8, 0.7),
            (8, 1.0, 0.9),
        ]
    ]
    log = tmp_path / "logging.jsonl"
    # ms-swift ends the file with a train summary line and a log_history line: both skipped.
    log.write_text("\n".join(json.dumps(r) for r in [*rows, {"train_runtime": 3.0}, {"log_history": rows}]) + "\n")
    summary = summarize_steps(grpo_steps(log))
    assert summary["steps"] == [1, 8]
    assert summary["first"] == {"reward": 0.2, "ExpertMatch": 0.1}
    # quarter = 8 // 4 = 2 logged steps: (0.2 + 0.4) / 2 and (0.8 + 1.0) / 2
    assert summary["first_quarter"] == pytest.approx({"reward": 0.3, "ExpertMatch": 0.2})
    assert summary["last_quarter"] == pytest.approx({"reward": 0.9, "ExpertMatch": 0.8})


def test_no_steps_is_an_error() -> None:
    with pytest.raises(ValueError, match="no GRPO logging steps"):
        summarize_steps([])


def test_think_lengths_per_step(tmp_path: Path) -> None:
    path = tmp_path / "completions.jsonl"
    tables = [
        {"step": ["1", "1"], "completion": ["<think>\nabcd\n</think>\n\n<answer>{}</answer>", "no think"]},
        {"step": ["2"], "completion": ["<think>\nab\n</think>"]},
    ]
    path.write_text("\n".join(json.dumps(t) for t in tables) + "\n")
    assert think_lengths(path) == {1: 2.0, 2: 2.0}  # step 1: (4 + 0) / 2
    assert think_lengths(tmp_path / "missing.jsonl") == {}
