"""End to end: the live diagnostics plugin in a real tiny `swift rlhf` GRPO run (ms-swift 4.4 here, 4.6 in compat).

Its metrics land in ms-swift's logging.jsonl beside ms-swift's own, and its flat-group share is ms-swift's
``frac_reward_zero_std`` computed again from the same scores. A threshold set to trip stops the run with its
message.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_e2e_grpo import CPU_FLAGS, EXAMPLES, ROOT, SWIFT, plugin_form, read_steps, tiny_model  # noqa: F401 (a fixture)

from rewardkit.pipelines.tiny_model import offline_env

KEYS = ["strict_format", "json_valid", "rewrite_similarity"]
NAMES = ["StrictFormat", "JsonValid", "RewriteSimilarity"]


def grpo(model: Path, data: Path, out: Path, config: Path | None) -> subprocess.CompletedProcess[str]:
    cmd = [
        SWIFT,
        "rlhf",
        "--rlhf_type",
        "grpo",
        "--model",
        str(model),
        "--dataset",
        str(data),
        "--external_plugins",
        plugin_form(),
        "plugins/diagnostics.py",
        "--callbacks",
        "rewardkit_diagnostics",
        "--reward_funcs",
        *KEYS,
        "--reward_weights",
        "0.3",
        "0.3",
        "0.4",
        "--enable_thinking",
        "true",
        "--beta",
        "0",
        "--max_steps",
        "2",
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        "8",
        "--max_completion_length",
        "32",
        "--output_dir",
        str(out),
        "--save_strategy",
        "no",
        *CPU_FLAGS,
    ]
    env = {k: v for k, v in {**os.environ, **offline_env()}.items() if k != "REWARDKIT_CONFIG"}
    if config is not None:
        env["REWARDKIT_CONFIG"] = str(config)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.e2e
@pytest.mark.compat
def test_the_metrics_reach_the_log(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    proc = grpo(tiny_model, EXAMPLES / "grpo_tiny.jsonl", tmp_path / "grpo", None)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    steps = read_steps(tmp_path / "grpo")
    assert len(steps) == 2
    for row in steps:
        # The same scores, the same rule (isclose(std, 0) on the weighted total): the same share.
        assert row["rewardkit/groups/zero_variance"] == pytest.approx(row["frac_reward_zero_std"])
        assert 0 <= row["rewardkit/groups/all_correct"] + row["rewardkit/groups/all_wrong"] <= 1
        for name in NAMES:
            assert 0 <= row[f"rewardkit/{name}/none_rate"] <= 1 and row[f"rewardkit/{name}/latency_ms"] > 0


@pytest.mark.e2e
@pytest.mark.compat
def test_a_threshold_set_to_trip_stops_the_run_with_its_message(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    # Golds without a rewritten question: RewriteSimilarity returns None for every completion (a None rate of 1),
    # above none_rate_stop 0.5 at the first step, and patience 1 stops there.
    rows = [json.loads(line) for line in (EXAMPLES / "grpo_tiny.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        gold = json.loads(row["solution"])
        gold.pop("补全后的问题")
        row["solution"] = json.dumps(gold, ensure_ascii=False)
    data = tmp_path / "no_rewrite.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    config = tmp_path / "rk.yaml"
    config.write_text("diagnostics:\n  none_rate_stop: 0.5\n  patience: 1\n", encoding="utf-8")
    proc = grpo(tiny_model, data, tmp_path / "grpo", config)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-4000:]
    assert (
        "rewardkit diagnostics stopped the run at step 1: 100% of the completions got None from RewriteSimilarity, "
        "above diagnostics.none_rate_stop = 0.5 for 1 steps in a row (since step 1)"
    ) in log, log[-4000:]
