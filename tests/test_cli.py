from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REWARD_KEYS

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_rewards_lists_every_key() -> None:
    out = run("rewards")
    assert out.returncode == 0, out.stderr
    keys = [line.split()[0] for line in out.stdout.splitlines()]
    assert keys == [*REWARD_KEYS, "task_completion", "task_completion_rate", "user_sim_failure"]


def test_demo_prints_a_table_with_every_reward() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    for name in ("StrictFormat", "JsonValid", "ThinkLength", "ThinkQuality", "RewriteSimilarity", "ExpertMatch"):
        assert name in out.stdout
    assert "hallucinated expert" in out.stdout


def test_score_missing_file_exits_2() -> None:
    out = run("score", "--data", "nope.jsonl")
    assert out.returncode == 2
    assert "nope.jsonl not found" in out.stderr
