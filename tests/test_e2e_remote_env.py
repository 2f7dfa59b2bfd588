"""End to end: real `swift rlhf` multi-turn GRPO whose episodes run on a `rewardkit env serve --openenv` server, by
both paths: rewardkit's own client (the ``simulated_user`` scheduler with ``rollout.env_servers``) and ms-swift's own
OpenEnv scheduler (``rewardkit_openenv``, on OpenEnv's client). Trainer and server share the ms-swift 4.6 job's stack,
which holds the ``openenv`` package (`make test-compat`); without it the tests are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _tiny_agent import OPEN_TASK, TASK, short_rows
from sim_server import free_port, wait_listening
from test_e2e_grpo import ROOT, SWIFT, read_steps

from rewardkit.pipelines.tiny_model import offline_env

pytest.importorskip("openenv")  # the ms-swift 4.6 job's stack: constraints/swift-4.6.txt

pytestmark = [pytest.mark.e2e, pytest.mark.compat, pytest.mark.openenv]

# The rollouts' scheduler and the plugin files each path loads, beside the rewards and the diagnostics.
PATHS = {
    "own client": ("simulated_user", "plugins/simulated_user.py"),
    "ms-swift's OpenEnv scheduler": ("rewardkit_openenv", "plugins/openenv_scheduler.py"),
}


def grpo_on_a_server(model: Path, tmp_path: Path, path: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Two GRPO steps of the CPU preset with its episodes on a server of this stack, by ``path``; the run and its
    output folder."""
    scheduler, plugin = PATHS[path]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_log = tmp_path / "server.log"
    serve = [sys.executable, "-m", "rewardkit.cli", "env", "serve", "--openenv", "--port", str(port)]
    with server_log.open("w") as log:
        server = subprocess.Popen(serve, cwd=ROOT, stdout=log, stderr=log)
    try:
        wait_listening(server, port, server_log, timeout_s=120)
        config = tmp_path / "config.yaml"  # the CPU preset's config, the episodes on the server
        raw = yaml.safe_load((ROOT / "recipes/agent/tiny_config.yaml").read_text(encoding="utf-8"))
        raw["rollout"]["env_servers"] = [url]
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        recipe: dict[str, Any] = yaml.safe_load(
            (ROOT / "recipes/agent/tiny_multiturn.yaml").read_text(encoding="utf-8")
        )
        recipe["ENV"] = {"REWARDKIT_CONFIG": str(config)}
        recipe["multi_turn_scheduler"] = scheduler
        recipe["external_plugins"] = ["rewards/__init__.py", plugin, "plugins/diagnostics.py"]
        recipe_path = tmp_path / "recipe.yaml"
        recipe_path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        data = tmp_path / "rows.jsonl"
        rows = short_rows([OPEN_TASK, TASK])
        if scheduler == "rewardkit_openenv":  # ms-swift's convention: each row names its server
            rows = [{**r, "env_config": {"base_url": url}} for r in rows]
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        out = tmp_path / "grpo"
        cmd = [
            *(SWIFT, "rlhf", str(recipe_path), "--callbacks", "rewardkit_diagnostics"),
            *("--model", str(model), "--dataset", str(data), "--output_dir", str(out)),
        ]
        env = {**os.environ, **offline_env(), "REWARDKIT_CONFIG": str(config)}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return proc, out


@pytest.mark.parametrize("path", list(PATHS))
def test_multi_turn_grpo_with_its_episodes_on_a_remote_server(
    tiny_agent_model: Path, tmp_path: Path, path: str
) -> None:
    proc, out = grpo_on_a_server(tiny_agent_model, tmp_path, path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    steps = read_steps(out)
    assert len(steps) == 2 and all(0.0 <= s["rewards/TaskCompletion/mean"] <= 1.0 for s in steps)
    # Every episode ran on the server and ended there: no env_error, each with the server's own record.
    (rollouts,) = out.glob("**/rollouts.jsonl")
    summaries = [json.loads(line) for line in rollouts.read_text().splitlines()]
    endings = [k for s in summaries for k, n in s["terminations"].items() for _ in range(n)]
    assert len(endings) == 2 * 4 and "env_error" not in endings, endings
    assert sum(s["tools"].get("find_user_id_by_name_zip", {}).get("calls", 0) for s in summaries) > 0
