"""End to end: real `swift rlhf` multi-turn GRPO with the simulated_user scheduler and the scripted user on CPU.

The run reports to TensorBoard and to wandb (offline: files only): what the live diagnostics sent there, a few of
each step's episodes, is read back from TensorBoard's event file and from wandb's run folder."""

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

KEYS = ("state_hash", "termination", "turns", "num_turns", "transcript")

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
    cmd += ["--report_to", "tensorboard", "wandb"]
    env = {**os.environ, **offline_env(), **wandb_offline(tmp_path / "wandb"), "RK_PROBE": str(probe_log)}
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
    completions = [json.loads(line) for f in out.glob("**/completions.jsonl") for line in f.read_text().splitlines()]
    turns = [n for row in completions for n in row["num_turns"]]  # columnar: one list per logged step
    assert turns and max(turns) > 1
    prompts = " ".join(p for row in completions for p in row["prompt"])
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
    # A sample of each step's episodes in both trackers (diagnostics.sample_episodes 4: all four of a step here), each
    # with its transcript, its scores, the reward's checks and why: the same episodes the reward saw, in its order.
    transcripts = [[s["transcript"] for s in seen[i * 4 : (i + 1) * 4]] for i in range(2)]
    logged_scores = {row["step"][0]: row["TaskCompletion"] for row in completions}  # ms-swift's own, by step
    scores = [logged_scores[str(step)] for step in (1, 2)]
    assert_episodes_in_the_trackers(out, tmp_path / "wandb", transcripts, scores)


def wandb_offline(folder: Path) -> dict[str, str]:
    """wandb writing its run's files under ``folder`` only: no network, no login, nothing in the home folder."""
    return {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        **{key: str(folder) for key in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")},
    }


def tensorboard_texts(out: Path, tag: str) -> dict[int, str]:
    """Step -> the text summary of ``tag`` in the run's TensorBoard event files, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    found: dict[int, str] = {}
    for path in out.glob("**/events.out.tfevents.*"):
        events = EventAccumulator(str(path), size_guidance={"tensors": 0})
        events.Reload()
        if tag in events.Tags()["tensors"]:
            for event in events.Tensors(tag):
                found[event.step] = tensor_util.make_ndarray(event.tensor_proto).item().decode("utf-8")
    return found


def wandb_tables(folder: Path, key: str) -> dict[int, dict]:
    """Step -> the table logged under ``key`` in the offline wandb run under ``folder`` (its JSON media file)."""
    (run,) = folder.glob("wandb/offline-run-*")
    *parents, name = key.split("/")
    tables = [
        json.loads(p.read_text()) for p in run.joinpath("files/media/table", *parents).glob(f"{name}_*.table.json")
    ]
    return {table["data"][0][table["columns"].index("step")]: table for table in tables}


def assert_episodes_in_the_trackers(
    out: Path, wandb_dir: Path, transcripts: list[list[str]], rewards: list[list[float]]
) -> None:
    steps = range(1, len(transcripts) + 1)
    # TensorBoard's writer files a text under its tag + "/text_summary"
    texts = tensorboard_texts(out, "rewardkit/episodes/text_summary")
    tables = wandb_tables(wandb_dir, "rewardkit/episodes")
    assert sorted(texts) == sorted(tables) == list(steps)
    for step, said, scores in zip(steps, transcripts, rewards, strict=True):
        table = tables[step]
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        assert [r["episode"] for r in rows] == [0, 1, 2, 3] and {r["step"] for r in rows} == {step}
        assert [r["transcript"] for r in rows] == said and all("assistant: " in t for t in said)
        assert [r["reward/TaskCompletion"] for r in rows] == scores
        assert all(
            {"reward/TaskCompletionRate", "reward/UserSimFailure", "termination", "turns"} <= set(r) for r in rows
        )
        text = texts[step]
        for r in rows:
            checks = r["checks"].splitlines()
            assert checks and all(c[:2] in ("✓ ", "✗ ") for c in checks), r
            # Why, by the score, the ending and the first check not met (the viewer's line).
            missed = [c[2:] for c in checks if c.startswith("✗")]
            if r["reward/TaskCompletion"] == 1.0:
                assert r["why"] == "complete: every check passed" and not missed
            elif r["why"].startswith("no credit:"):
                assert r["why"] == f"no credit: it ended as {r['termination']}; only a stop or a transfer earns credit"
            else:
                assert r["why"].startswith(f"not complete: {missed[0]}: not met"), r
            # The same episode in TensorBoard's text: its heading, why, each check and each transcript line.
            heading = f"### step {step}, episode {r['episode']}: TaskCompletion {r['reward/TaskCompletion']:g}"
            assert heading in text and f"**why:** {r['why']}" in text
            assert all(f"- {c}" in text for c in checks)
            assert all(f"    {line}" in text for line in r["transcript"].splitlines())
