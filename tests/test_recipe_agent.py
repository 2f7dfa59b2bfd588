"""`rewardkit recipe run agent --preset tiny`, shortened: synthesis -> SFT -> GRPO -> evaluation -> summary.

The full-length runs are the measurements in docs/results.md; here we check the chain with the control and two
seeds: every stage ran, the summary holds the four kinds of model on both task sets, greedy and sampled, with
two runs per GRPO kind and the paired intervals, the data counts reconcile, a rerun resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.pipelines.agent import SELECT_TRIALS

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["base", "sft", "grpo", "grpo_control", "grpo_s2", "grpo_control_s2"]
STAGES = [
    "data",
    "model",
    "sft",
    "select",
    "grpo",
    "grpo_control",
    "grpo_s2",
    "grpo_control_s2",
    *(f"eval_{m}" for m in MODELS),
    "summary",
]
# --band 0,1: the 4-step cold start completes nothing, and GRPO still trains on every training task
ARGS = [
    "--sft-steps",
    "4",
    "--grpo-steps",
    "1",
    "--band",
    "0,1",
    "--eval-tasks",
    "2",
    "--eval-train-tasks",
    "3",
    "--eval-samples",
    "2",
    "--baseline",
    "--seeds",
    "2",
]
CELLS = ["greedy_train", "greedy_test", "sampled_train", "sampled_test"]


def rewardkit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("agent")
    return workdir, rewardkit("recipe", "run", "agent", "--preset", "tiny", "--workdir", str(workdir), *ARGS)


@pytest.mark.e2e
@pytest.mark.compat  # the whole chain, multi-turn GRPO included, on ms-swift 4.4 and 4.6
class TestAgentChain:
    def test_every_stage_ran(self, short_run) -> None:
        workdir, proc = short_run
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert sorted(p.stem for p in (workdir / ".stages").glob("*.json")) == sorted(STAGES)
        for command in ("synth agent", "swift sft", "swift rlhf", "eval agent"):
            assert command in proc.stdout
        assert "--multi_turn_scheduler" not in proc.stdout  # the recipe file sets it, not the command line
        assert "grpo_vs_control (sampled, train)" in proc.stdout  # the closing table
        # The select stage evaluated the cold start on every training task and kept those in the band: all of them.
        stages = workdir / ".stages"
        chosen, data = (json.loads((stages / f"{s}.json").read_text()) for s in ("select", "data"))
        assert chosen["tasks"] == data["tasks"] and chosen["rows"] == data["grpo_rows"]
        # It samples 8 trials a task (a band is read in eighths) whatever --eval-samples (2 here) gives the evaluation.
        select = json.loads((Path(chosen["dir"]) / "summary.json").read_text(encoding="utf-8"))
        assert select["trials"] == SELECT_TRIALS == 8
        assert "grpo_vs_control (sampled, GRPO's tasks)" in proc.stdout
        # The GRPO runs read the preset's config plus the chain's domain: every rank of swift rlhf loads it from there.
        config = (workdir / "grpo_config.yaml").read_text(encoding="utf-8")
        assert "domain: retail" in config and "kind: scripted" in config

    def test_summary_has_every_model_on_both_task_sets_greedy_and_sampled(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        assert list(summary["models"]) == MODELS and summary["domain"] == "retail"
        for model in MODELS:
            for cell in CELLS:
                metrics = summary["models"][model][cell]
                # greedy: one trial per task; sampled: --eval-samples 2; --eval-train-tasks 3, --eval-tasks 2
                tasks = 3 if cell.endswith("train") else 2
                assert metrics["episodes"]["total"] == tasks * (2 if cell.startswith("sampled") else 1), cell
                assert metrics["episodes"]["infra_error"] == 0  # scripted user: nothing is infrastructure
                assert 0.0 <= metrics["pass_hat_k"]["1"] <= 1.0
                assert metrics["valid_tool_calls"] <= metrics["tool_calls"]
        assert summary["grpo"]["grpo_s2"]["steps"] == [1, 1] and summary["models"]["grpo_s2"]["seed"] == 43
        assert Path(summary["plot"]).stat().st_size > 10_000 and Path(summary["bars"]).stat().st_size > 10_000

    def test_two_seeds_give_two_runs_per_kind_and_paired_intervals(self, short_run) -> None:
        workdir, _ = short_run
        summary = json.loads((workdir / "summary.json").read_text())
        assert summary["seeds"] == 2 and summary["sign_test"] is None  # no --sign-test here
        for kind, models in {"grpo": ["grpo", "grpo_s2"], "control": ["grpo_control", "grpo_control_s2"]}.items():
            cell = summary["pass1"]["sampled"]["train"][kind]
            assert cell["runs"] == 2 and cell["models"] == models
            assert cell["min"] <= cell["mean"] <= cell["max"]
        pair = summary["paired"]["grpo_vs_control"]["sampled_train"]
        assert pair["seeds"] == [2, 2] and pair["items"] == 3  # the first 3 training tasks
        assert pair["ci"][0] <= pair["diff"] <= pair["ci"][1]

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
        proc = rewardkit("recipe", "run", "agent", "--workdir", str(workdir), *ARGS)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.count("done earlier, skipped") == len(STAGES)
