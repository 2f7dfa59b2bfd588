"""`rewardkit recipe run planning --preset tiny`, shortened to a few steps per stage.

The full-length run (`make demo`) is the measurement in
docs/results.md#the-planning-chain-on-cpu-make-demo; here we check the chain itself: every
stage ran, the summary has all seven rewards, reruns resume.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.rewards import PLANNER_WEIGHTS, REWARDS

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["model", "build", "sft", "eval_sft", "grpo", "summary"]


def rewardkit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("planning")
    args = ["--workdir", str(workdir), "--sft-steps", "2", "--grpo-steps", "2", "--eval-rows", "4"]
    return workdir, rewardkit("recipe", "run", "planning", "--preset", "tiny", *args)


@pytest.mark.e2e
class TestRecipeRun:
    def test_every_stage_ran_and_printed_its_commands(self, short_run) -> None:
        workdir, proc = short_run
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert sorted(p.stem for p in (workdir / ".stages").glob("*.json")) == sorted(STAGES)
        for command in ("swift sft", "swift infer", "swift rlhf"):
            assert command in proc.stdout

    def test_summary_has_all_seven_rewards_and_a_plot(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        names = {REWARDS[k].__name__ for k in PLANNER_WEIGHTS}
        assert names <= set(summary["grpo"]["first"]) and names <= set(summary["grpo"]["last"])
        assert set(PLANNER_WEIGHTS) <= set(summary["eval"]["sft"])
        assert Path(summary["grpo"]["plot"]).stat().st_size > 10_000

    def test_build_counts_reconcile(self, short_run) -> None:
        workdir, _ = short_run
        reports = json.loads((workdir / ".stages" / "build.json").read_text())["reports"]
        for report in reports.values():
            assert report["read"] == report["written"] + sum(report["rejected"].values())
        assert reports["sft"]["rejected"]  # the bundled teacher data has bad samples on purpose

    def test_rerun_skips_and_force_redoes_from_a_stage(self, short_run) -> None:
        workdir, _ = short_run
        proc = rewardkit("recipe", "run", "planning", "--workdir", str(workdir), "--force", "summary")
        assert proc.returncode == 0, proc.stderr[-3000:]
        for stage in STAGES[:-1]:
            assert f"[{stage}] done earlier, skipped" in proc.stdout
        assert "[summary] finished" in proc.stdout

    def test_a_failing_stage_names_itself_and_its_log(self, tmp_path: Path) -> None:
        missing = tmp_path / "no-such-model"
        proc = rewardkit("recipe", "run", "planning", "--preset", "full", "--model", str(missing),
                         "--workdir", str(tmp_path / "w"), "--sft-steps", "1")  # fmt: skip
        assert proc.returncode == 1
        assert "stage 'sft' failed" in proc.stderr and "logs/sft.log" in proc.stderr
        assert not (tmp_path / "w" / ".stages" / "sft.json").exists()
