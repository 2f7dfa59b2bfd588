"""End to end: real `swift rlhf` multi-turn GRPO with the simulated_user scheduler and the scripted user on CPU."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from _tiny_agent import OPEN_TASK, TASK, short_rows
from test_e2e_grpo import ROOT, SWIFT, assert_audit_is_the_hand_count, read_steps

from rewardkit.pipelines.tiny_model import offline_env

# A probe plugin, loaded after the real ones: it records what TaskCompletion received.
PROBE = """
import json, os
from swift.rewards import orms
from rewardkit.rewards import TaskCompletion as Real

KEYS = ("state_hash", "termination", "turns", "num_turns")

class TaskCompletion(Real):  # same class name: ms-swift logs rewards/TaskCompletion/mean
    def __call__(self, completions, **kwargs):
        infos = kwargs.get("rollout_infos") or []
        with open(os.environ["RK_PROBE"], "a") as f:
            for info in infos:
                f.write(json.dumps({k: info.get(k) for k in KEYS}) + "\\n")
        return super().__call__(completions, **kwargs)

orms["task_completion"] = TaskCompletion
"""


def probed_rlhf(recipe: Path, probe: Path, model: Path, data: Path, out: Path) -> list[str]:
    """``swift rlhf`` of a multi-turn recipe with the rewards, the scheduler, the diagnostics and ``probe`` loaded."""
    plugins = ["rewards/__init__.py", "plugins/simulated_user.py", "plugins/diagnostics.py", str(probe)]
    return [
        *(SWIFT, "rlhf", str(recipe), "--external_plugins", *plugins, "--callbacks", "rewardkit_diagnostics"),
        *("--model", str(model), "--dataset", str(data), "--output_dir", str(out)),
    ]


@pytest.mark.e2e
@pytest.mark.compat
def test_multi_turn_grpo_with_the_scripted_user(tiny_agent_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "tau2_mt.jsonl"
    rows = short_rows([OPEN_TASK, TASK])
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    probe, probe_log = tmp_path / "probe.py", tmp_path / "probe.jsonl"
    probe.write_text(PROBE, encoding="utf-8")
    out = tmp_path / "grpo"
    cmd = probed_rlhf(ROOT / "recipes/agent/tiny_multiturn.yaml", probe, tiny_agent_model, data, out)
    env = {**os.environ, **offline_env(), "RK_PROBE": str(probe_log)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    (tmp_path / "swift.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]

    steps = read_steps(out)
    assert len(steps) == 2
    for step in steps:
        assert step["rewards/UserSimFailure/mean"] == 0.0
        assert 0.0 <= step["rewards/TaskCompletion/mean"] <= 1.0
    # TaskCompletion saw the live episodes' records, not replays.
    seen = [json.loads(line) for line in probe_log.read_text().splitlines()]
    assert len(seen) == 2 * 4 and all(isinstance(s["state_hash"], str) and s["termination"] for s in seen)
    assert max(s["num_turns"] for s in seen) > 1
    # The completions log shows the conversations: the scripted user answered in later turns.
    logged = [json.loads(line) for f in out.glob("**/completions.jsonl") for line in f.read_text().splitlines()]
    turns = [n for row in logged for n in row["num_turns"]]  # columnar: one list per logged step
    assert turns and max(turns) > 1
    prompts = " ".join(p for row in logged for p in row["prompt"])
    # A tool result from the database (the user id find_user_id_by_name_zip returns), and a scripted user reply.
    assert "<tool_response>" in prompts and "yusuf_rossi_9620" in prompts
    assert "As I said" in prompts or "zip code" in prompts
    assert_audit_is_the_hand_count(out, tmp_path)  # turns included
    # The live diagnostics summed up each step's episodes as the reward saw them: the same endings, step by step.
    (rollouts,) = out.glob("**/rollouts.jsonl")
    logged = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert [r["episodes"] for r in logged] == [4, 4]
    by_step = [Counter(s["termination"] for s in seen[i * 4 : (i + 1) * 4]) for i in range(2)]
    assert [Counter(r["terminations"]) for r in logged] == by_step
    assert [r["turns"] for r in logged] == [[s["turns"] for s in seen[i * 4 : (i + 1) * 4]] for i in range(2)]
    for row in steps:
        assert 0 <= row["rewardkit/episodes/max_turns"] <= 1 and row["rewardkit/episodes/excluded"] == 0
