"""`rewardkit recipe run planning --preset tiny`, shortened to a few steps per stage.

The full-length runs are the measurements in docs/results.md; here we check the chain itself, with the
sign test on: every stage ran, every GRPO run saved a model that was evaluated greedy and sampled on both
splits, the summary has all seven rewards, the pairs with their intervals and the sign test's directions,
reruns resume.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.rewards import PLANNER_WEIGHTS, REWARDS

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["base", "sft", "grpo", "grpo_control", "grpo_inverted"]
ARGS = ["--sft-steps", "2", "--grpo-steps", "2", "--eval-rows", "3", "--eval-samples", "2", "--sign-test"]
STAGES = ["model", "build", "sft", "grpo", "grpo_control", "grpo_inverted", *(f"eval_{m}" for m in MODELS), "summary"]


def rewardkit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("planning")
    return workdir, rewardkit("recipe", "run", "planning", "--preset", "tiny", "--workdir", str(workdir), *ARGS)


@pytest.mark.e2e
class TestRecipeRun:
    def test_every_stage_ran_and_printed_its_commands(self, short_run) -> None:
        workdir, proc = short_run
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert sorted(p.stem for p in (workdir / ".stages").glob("*.json")) == sorted(STAGES)
        for command in ("swift sft", "swift rlhf"):
            assert command in proc.stdout
        for model in MODELS:  # evaluated in-process: 3 rows x 2 splits greedy, twice that sampled
            assert f"[eval_{model}] greedy: 6 completions of " in proc.stdout
            assert f"[eval_{model}] sampled: 12 completions of " in proc.stdout

    def test_summary_has_every_model_greedy_and_sampled_with_all_seven_rewards(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        assert list(summary["models"]) == MODELS
        for model in MODELS:
            for mode in ("greedy", "sampled"):
                for split in ("train", "test"):
                    assert set(PLANNER_WEIGHTS) | {"weighted", "think_mean", "think_sd"} <= set(
                        summary["models"][model][mode][split]
                    )
        scores = [json.loads(line) for line in (workdir / "eval" / "grpo" / "scores.jsonl").read_text().splitlines()]
        # Paired evaluation: the control (lr 1e-12, the same weights) writes SFT's completions, sample for sample.
        sft, control = (
            (workdir / "eval" / m / "scores.jsonl").read_text().splitlines() for m in ("sft", "grpo_control")
        )
        assert [json.loads(r)["completion"] for r in control] == [json.loads(r)["completion"] for r in sft]
        # 3 rows per split x 2 splits, greedy once and sampled twice: 6 + 12 completions
        assert len(scores) == 18 and sum(r["mode"] == "sampled" for r in scores) == 12
        names = {REWARDS[k].__name__ for k in PLANNER_WEIGHTS}
        for stage in ("grpo", "grpo_control", "grpo_inverted"):
            assert names <= set(summary["grpo"][stage]["first"]) and names <= set(summary["grpo"][stage]["last"])
            share = summary["grpo"][stage]["zero_std_share"]  # ms-swift's frac_reward_zero_std, per logged step
            assert share and all(0.0 <= v <= 1.0 for v in share)
            assert Path(summary["grpo"][stage]["plot"]).stat().st_size > 10_000
        assert Path(summary["plot"]).stat().st_size > 10_000

    def test_summary_pairs_the_kinds_and_records_the_sign_test(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        assert set(summary["paired"]) == {"sft_vs_base", "grpo_vs_sft", "grpo_vs_control", "inverted_vs_control"}
        pair = summary["paired"]["grpo_vs_control"]["sampled_test"]
        assert pair["items"] == 3 and pair["ci"][0] <= pair["diff"] <= pair["ci"][1]
        sign = summary["sign_test"]
        assert set(sign["directions"].values()) <= {"up", "down", "flat"} and isinstance(sign["opposite"], bool)
        assert summary["weighted"]["sampled"]["train"]["grpo"]["runs"] == 1  # one seed

    def test_build_counts_reconcile(self, short_run) -> None:
        workdir, _ = short_run
        reports = json.loads((workdir / ".stages" / "build.json").read_text())["reports"]
        for report in reports.values():
            assert report["read"] == report["written"] + sum(report["rejected"].values())
        assert reports["sft"]["rejected"]  # the bundled teacher data has bad samples on purpose

    def test_rerun_skips_and_force_redoes_from_a_stage(self, short_run) -> None:
        workdir, _ = short_run
        proc = rewardkit("recipe", "run", "planning", "--workdir", str(workdir), *ARGS, "--force", "summary")
        assert proc.returncode == 0, proc.stderr[-3000:]
        for stage in STAGES[:-1]:
            assert f"[{stage}] done earlier, skipped" in proc.stdout
        assert "[summary] finished" in proc.stdout

    def test_a_failing_stage_names_itself_and_its_log(self, tmp_path: Path) -> None:
        missing = tmp_path / "no-such-model"
        proc = rewardkit(
            "recipe",
            "run",
            "planning",
            "--preset",
            "full",
            "--model",
            str(missing),
            "--workdir",
            str(tmp_path / "w"),
            "--sft-steps",
            "1",
        )
        assert proc.returncode == 1
        assert "stage 'sft' failed" in proc.stderr and "logs/sft.log" in proc.stderr
        assert not (tmp_path / "w" / ".stages" / "sft.json").exists()
