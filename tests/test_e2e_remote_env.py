"""End to end: real `swift rlhf` multi-turn GRPO whose episodes run on a `rewardkit env serve --openenv` server.

The trainer's side is this suite's ms-swift stack; the server runs in the OpenEnv stack (its own environment:
constraints/openenv.txt), named by ``$REWARDKIT_OPENENV_PYTHON``, which `make test-openenv` sets. Without it the
test is skipped: the main job has no OpenEnv stack.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from _tiny_agent import OPEN_TASK, TASK, short_rows
from sim_server import free_port, wait_listening
from test_e2e_grpo import ROOT, SWIFT, read_steps

from rewardkit.pipelines.tiny_model import offline_env

SERVER_PYTHON = os.environ.get("REWARDKIT_OPENENV_PYTHON")


@pytest.mark.e2e
@pytest.mark.openenv
@pytest.mark.skipif(SERVER_PYTHON is None, reason="no OpenEnv stack: set $REWARDKIT_OPENENV_PYTHON (make test-openenv)")
def test_multi_turn_grpo_with_its_episodes_on_a_remote_server(tiny_agent_model: Path, tmp_path: Path) -> None:
    port = free_port()
    server_log = tmp_path / "server.log"
    serve = [str(SERVER_PYTHON), "-m", "rewardkit.cli", "env", "serve", "--openenv", "--port", str(port)]
    with server_log.open("w") as log:
        server = subprocess.Popen(serve, cwd=ROOT, stdout=log, stderr=log)
    try:
        wait_listening(server, port, server_log, timeout_s=120)
        config = tmp_path / "config.yaml"  # the CPU preset's config, the episodes on the server
        raw = yaml.safe_load((ROOT / "recipes/agent/tiny_config.yaml").read_text(encoding="utf-8"))
        raw["rollout"]["env_servers"] = [f"http://127.0.0.1:{port}"]
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        recipe = yaml.safe_load((ROOT / "recipes/agent/tiny_multiturn.yaml").read_text(encoding="utf-8"))
        recipe["ENV"] = {"REWARDKIT_CONFIG": str(config)}
        recipe_path = tmp_path / "recipe.yaml"
        recipe_path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        data = tmp_path / "rows.jsonl"
        rows = short_rows([OPEN_TASK, TASK])
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        out = tmp_path / "grpo"
        plugins = ["rewards/__init__.py", "plugins/simulated_user.py", "plugins/diagnostics.py"]
        cmd = [
            *(SWIFT, "rlhf", str(recipe_path), "--external_plugins", *plugins, "--callbacks", "rewardkit_diagnostics"),
            *("--model", str(tiny_agent_model), "--dataset", str(data), "--output_dir", str(out)),
        ]
        env = {**os.environ, **offline_env(), "REWARDKIT_CONFIG": str(config)}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    steps = read_steps(out)
    assert len(steps) == 2 and all(0.0 <= s["rewards/TaskCompletion/mean"] <= 1.0 for s in steps)
    # Every episode ran on the server and ended there: no env_error, each with the server's own record.
    (rollouts,) = out.glob("**/rollouts.jsonl")
    summaries = [json.loads(line) for line in rollouts.read_text().splitlines()]
    endings = [k for s in summaries for k, n in s["terminations"].items() for _ in range(n)]
    assert len(endings) == 2 * 4 and "env_error" not in endings, endings
    assert sum(s["tools"].get("find_user_id_by_name_zip", {}).get("calls", 0) for s in summaries) > 0
