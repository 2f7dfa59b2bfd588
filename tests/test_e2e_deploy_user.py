"""End to end: the user simulator is a real OpenAI-compatible server, `swift deploy` of the tiny model on CPU.

The `openai` simulator talks HTTP to it from inside `swift rlhf`'s multi-turn loop; one GRPO step must complete
with every episode's user turns written by the server (none ends in user_sim_error).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from _deploy import swift_deploy
from _tiny_agent import OPEN_TASK, TASK, short_rows
from test_e2e_grpo import ROOT, read_steps
from test_e2e_multi_turn import PROBE, probed_rlhf

from rewardkit.cli import main
from rewardkit.pipelines.tiny_model import offline_env


@pytest.mark.e2e
def test_grpo_step_with_a_swift_deploy_user_simulator(tiny_agent_model: Path, tmp_path: Path) -> None:
    env = {**os.environ, **offline_env()}
    with swift_deploy(tiny_agent_model, tmp_path / "deploy.log", "tiny-user") as base_url:
        config = tmp_path / "rewardkit.yaml"
        # every tiny reply is cut at 24 tokens and asked for again with 48: a generous timeout on a loaded machine
        user_sim = {"kind": "openai", "base_url": base_url, "model": "tiny-user", "max_tokens": 24, "retries": 1}
        user_sim["timeout_s"] = 180
        rollout = {"max_turns": 3, "token_budget": 512, "error_budget": 4}
        config.write_text(yaml.safe_dump({"user_sim": user_sim, "rollout": rollout}), encoding="utf-8")
        recipe = yaml.safe_load((ROOT / "recipes/agent/tiny_multiturn.yaml").read_text(encoding="utf-8"))
        recipe["ENV"] = {"REWARDKIT_CONFIG": str(config)}
        recipe.update(max_steps=1, max_turns=3)
        recipe_file = tmp_path / "grpo.yaml"
        recipe_file.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        data = tmp_path / "rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in short_rows([OPEN_TASK, TASK])), encoding="utf-8")
        probe, probe_log = tmp_path / "probe.py", tmp_path / "probe.jsonl"
        probe.write_text(PROBE.replace("KEYS = (", 'KEYS = ("user_sim", "error", '), encoding="utf-8")
        out = tmp_path / "grpo"
        cmd = probed_rlhf(recipe_file, probe, tiny_agent_model, data, out)
        run_env = {**env, "RK_PROBE": str(probe_log), "REWARDKIT_CONFIG": str(config)}
        proc = subprocess.run(cmd, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=900, check=False)
        (tmp_path / "swift.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]

    steps = read_steps(out)
    assert len(steps) == 1 and steps[0]["rewards/UserSimFailure/mean"] == 0.0
    seen = [json.loads(line) for line in probe_log.read_text().splitlines()]
    # every user turn came from the server; the tiny model's babble may be flagged (user_sim_mistake), never lost
    assert len(seen) == 4 and all(s["user_sim"] == base_url for s in seen)
    assert all(s["error"] is None or s["termination"] == "user_sim_mistake" for s in seen)
    assert all(s["termination"] != "user_sim_error" for s in seen)
    # The simulator's ledger for the step: at least each episode's opening, every request answered with tokens; the
    # same figures in ms-swift's metrics and in the audit.
    (rollouts,) = out.glob("**/rollouts.jsonl")
    (row,) = [json.loads(line) for line in rollouts.read_text().splitlines()]
    (user,) = row["ledger"]
    assert (user["role"], user["endpoint"], user["failures"], user["errors"]) == ("user", base_url, 0, 0)
    assert user["requests"] >= 4 and user["prompt_tokens"] > 0 and user["completion_tokens"] > 0
    assert steps[0]["rewardkit/user/requests"] == user["requests"]
    report = tmp_path / "audit.json"
    assert main(["audit", str(out), "--json", str(report), "--price", "1", "2"]) == 0
    (total,) = json.loads(report.read_text())["ledger"]
    assert total["requests"] == user["requests"]
    assert total["cost_usd"] == pytest.approx((user["prompt_tokens"] + 2 * user["completion_tokens"]) / 1e6)
