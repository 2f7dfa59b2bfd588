from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.recipes import EXAMPLES
from rewardkit.rewards import PLANNER_WEIGHTS, REWARDS

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = [
    "StrictFormat",
    "JsonValid",
    "ThinkLength",
    "ThinkQuality",
    "RewriteSimilarity",
    "ExpertMatch",
    "PlanCoverage",
    "weighted",
]

# `rewardkit demo` on the bundled completions, as printed: one score per column above. A refactor must not move
# any of them; a deliberate change to a formula or a default updates this table in the same commit.
DEMO = {
    "perfect": [1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000],
    "paraphrased plan": [1.000, 1.000, 1.000, 1.000, 0.638, 1.000, 0.912, 0.919],
    "missed an expert": [1.000, 1.000, 1.000, 1.000, 0.553, 0.667, 0.600, 0.771],
    "hallucinated expert": [1.000, 1.000, 1.000, 1.000, 1.000, 0.000, 0.684, 0.668],
    "fullwidth expert name": [1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000],
    "overthinking": [1.000, 1.000, 0.000, 0.163, 1.000, 1.000, 1.000, 0.816],
    "no think": [0.000, 1.000, 0.000, 0.000, 1.000, 1.000, 1.000, 0.700],
    "plan leaked into think": [1.000, 1.000, 0.994, 0.000, 1.000, 1.000, 1.000, 0.899],
    "broken JSON": [1.000, 0.000, 1.000, 1.000, 0.000, 0.000, 0.000, 0.300],
    "two answer blocks": [1.000, 0.000, 1.000, 1.000, 0.000, 0.000, 0.000, 0.300],
    "mean": [0.900, 0.800, 0.799, 0.716, 0.719, 0.667, 0.720, 0.737],
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def table(stdout: str) -> dict[str, list[float]]:
    """The score rows of the printed table (the mean footer included), by completion name."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == len(COLUMNS) + 1 and cells[0]:
            try:
                rows[cells[0]] = [float(c) for c in cells[1:]]
            except ValueError:  # the header
                continue
    return rows


def test_rewards_lists_every_key() -> None:
    out = run("rewards")
    assert out.returncode == 0, out.stderr
    keys = [line.split()[0] for line in out.stdout.splitlines()]
    assert keys == list(REWARDS)  # every reward module, in the registry's order
    assert [REWARDS[k].order for k in keys] == sorted(REWARDS[k].order for k in keys)


def test_demo_prints_every_score_of_the_bundled_completions() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    for name in COLUMNS:
        assert name in out.stdout
    assert table(out.stdout) == DEMO


def test_weighted_column_is_the_planner_weighted_sum() -> None:
    # Each printed score is rounded to 3 places, so the recomputed total may differ by about 0.001.
    weights = list(PLANNER_WEIGHTS.values())
    assert sum(weights) == pytest.approx(1.0)
    for name, (*scores, total) in DEMO.items():
        if name != "mean":
            assert sum(w * s for w, s in zip(weights, scores, strict=True)) == pytest.approx(total, abs=1.1e-3), name


def test_score_scores_the_given_rows_only(tmp_path: Path) -> None:
    wanted = {"perfect", "broken JSON"}
    lines = (EXAMPLES / "completions.jsonl").read_text(encoding="utf-8").splitlines()
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(ln for ln in lines if json.loads(ln)["name"] in wanted) + "\n", encoding="utf-8")
    out = run("score", "--data", str(data))
    assert out.returncode == 0, out.stderr
    rows = table(out.stdout)
    assert rows == {
        "perfect": DEMO["perfect"],
        "broken JSON": DEMO["broken JSON"],
        "mean": [1.000, 0.500, 1.000, 1.000, 0.500, 0.500, 0.500, 0.650],
    }


def test_score_missing_file_exits_2() -> None:
    out = run("score", "--data", "nope.jsonl")
    assert out.returncode == 2
    assert "nope.jsonl not found" in out.stderr
