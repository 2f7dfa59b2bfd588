"""`rewardkit recipe run tau2 --preset tiny`, shortened: synthesis -> SFT -> GRPO -> evaluation -> summary.

The full-length run (`make demo-tau2`) is the measurement in
docs/results.md#the-tau2-chain-on-cpu-make-demo-tau2; here we check the chain: every stage ran, the
summary holds the three models on both task sets, the data counts reconcile, a rerun resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["data", "model", "sft", "grpo", "eval_base", "eval_sft", "eval_grpo", "summary"]
MODELS = ["base", "sft", "grpo"]


def rewardkit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("tau2")
    args = ["--workdir", str(workdir), "--sft-steps", "4", "--grpo-steps", "1", "--eval-tasks", "2"]
    return workdir, rewardkit("recipe", "run", "tau2", "--preset", "tiny", *args)


@pytest.mark.e2e
@pytest.mark.compat  # the whole chain, multi-turn GRPO included, on ms-swift 4.4 and 4.6
class TestTau2Chain:
    def test_every_stage_ran(self, short_run) -> None:
        workdir, proc = short_run
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert sorted(p.stem for p in (workdir / ".stages").glob("*.json")) == sorted(STAGES)
        for command in ("synth tau2", "swift sft", "swift rlhf", "eval tau2"):
            assert command in proc.stdout
        assert "--multi_turn_scheduler" not in proc.stdout  # the recipe file sets it, not the command line
        assert "pass^1 (greedy)" in proc.stdout  # the closing table

    def test_summary_has_the_three_models_on_both_task_sets(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        assert list(summary["models"]) == MODELS
        for model in MODELS:
            for split in ("train", "test"):
                metrics = summary["models"][model][split]
                assert metrics["episodes"]["total"] == 2  # --eval-tasks 2, one greedy trial each
                assert metrics["episodes"]["infra_error"] == 0  # scripted user: nothing is infrastructure
                assert 0.0 <= metrics["pass_hat_k"]["1"] <= 1.0
                assert metrics["valid_tool_calls"] <= metrics["tool_calls"]
        assert summary["grpo"]["grpo"]["steps"] == [1, 1]
        assert {"sft_vs_base_train", "grpo_vs_sft_test"} <= set(summary["paired"])
        assert Path(summary["plot"]).stat().st_size > 10_000

    def test_synthesis_counts_reconcile_and_rows_are_agent_format(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        synthesis = summary["synthesis"]
        assert synthesis["read"] == synthesis["kept"] + sum(synthesis["rejected"].values())
        # The gold agent with the scripted user completes every training task: one row per task.
        assert synthesis["kept"] == len(summary["train_tasks"]) == synthesis["read"]
        rows = [json.loads(line) for line in (workdir / "data" / "sft.jsonl").read_text().splitlines()]
        roles = {m["role"] for r in rows for m in r["messages"]}
        assert "tool_call" in roles and "tool" in roles and "tools" not in rows[0]  # tiny preset: no tools column
        grpo = [json.loads(line) for line in (workdir / "data" / "grpo.jsonl").read_text().splitlines()]
        assert sorted(json.loads(r["task"])["id"] for r in grpo) == sorted(summary["train_tasks"])

    def test_rerun_skips_every_stage(self, short_run) -> None:
        workdir, _ = short_run
        proc = rewardkit("recipe", "run", "tau2", "--workdir", str(workdir), "--eval-tasks", "2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.count("done earlier, skipped") == len(STAGES)
