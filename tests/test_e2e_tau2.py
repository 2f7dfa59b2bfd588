"""End to end: real `swift rlhf` GRPO on `rewardkit build tau2-grpo` rows with task_completion."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _retail_gold import rows_of
from test_e2e_grpo import CPU_FLAGS, ROOT, SWIFT, plugin_form, read_steps

from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.pipelines.chain import swift_flags
from rewardkit.pipelines.tiny_model import build_tiny_model, offline_env

# No task pays a rollout that does nothing: task 10's gold leaves the database as it is, but only a transfer to a
# human completes it, a call a random model never makes; task 0 needs an exchange it never writes. Two prompts per
# step, so TaskCompletion's mean must be exactly (0 + 0) / 2, and the reward column is that mean.
NEVER = ("10", "0")


def assert_tools_reach_the_prompt(model: Path, row: dict) -> None:
    """The row's ``tools`` string is rendered into the system prompt by ms-swift's own template."""
    from swift.model import get_processor
    from swift.template import TemplateInputs, get_template

    template = get_template(get_processor(str(model)))
    encoded = template.encode(TemplateInputs.from_dict({"messages": row["messages"], "tools": row["tools"]}))
    prompt = template.safe_decode(encoded["input_ids"])
    assert "<tools>" in prompt and all(f'"{name}"' in prompt for name in ("cancel_pending_order", "calculate"))


@pytest.mark.e2e
@pytest.mark.compat
def test_grpo_on_tau2_rows_scores_task_completion(tmp_path: Path) -> None:
    rows, report = build_tau2_grpo(Tau2Options(domain="retail", split="train"))
    assert [json.loads(r["task"])["id"] for r in rows] == rows_of("train") and report.written == len(rows)
    chosen = [r for r in rows if json.loads(r["task"])["id"] in NEVER]
    data = tmp_path / "tau2.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen), encoding="utf-8")
    # A tokenizer trained on the prompts keeps the policy + 16 tool specs near 4k tokens.
    corpus = [r["messages"][0]["content"] + r["tools"] + r["messages"][1]["content"] for r in rows]
    model = build_tiny_model(tmp_path / "model", corpus, max_positions=8192)
    assert_tools_reach_the_prompt(model, chosen[0])

    out = tmp_path / "grpo"
    cmd = [
        *(SWIFT, "rlhf", "recipes/agent/rewards.yaml", "--external_plugins", plugin_form()),
        *("--model", str(model), "--dataset", str(data), "--output_dir", str(out)),
        *CPU_FLAGS,
        *swift_flags({"beta": 0, "max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 4}),
        *swift_flags({"max_completion_length": 24, "save_strategy": "no", "log_completions": "true"}),
        *swift_flags({"max_length": 8192}),  # the policy and 16 tool specs: near 4k tokens
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, **offline_env()}, capture_output=True, text=True, timeout=900, check=False
    )
    (tmp_path / "swift.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]

    steps = read_steps(out)
    assert len(steps) == 2
    for row in steps:
        assert row["rewards/TaskCompletion/mean"] == pytest.approx(0.0)
        assert 0.0 <= row["rewards/TaskCompletionRate/mean"] <= 1.0
        assert row["reward"] == pytest.approx(row["rewards/TaskCompletion/mean"])  # the rate has weight 0
