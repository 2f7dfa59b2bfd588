"""End to end: ``rewardkit eval agent`` and ``eval compare`` against real HTTP endpoints.

* The agent is a real OpenAI-compatible server, ``swift deploy`` of the tiny Qwen3 on CPU (e2e): whatever it
  says is a (failed or passed) task, never an infrastructure error, and the episodes hold its replies.
* The user simulator is a local server (tests/sim_server.py) killed mid-run: the episodes it could not answer
  are excluded and counted; ``--resume`` against the restarted server reruns exactly those.
* An existing out dir without ``--resume`` is refused; ``eval compare`` of gold against the tiny model.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from _deploy import swift_deploy
from _tiny_agent import SYSTEM
from sim_server import SimServer, _Server, free_port

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.termination import EXCLUDED, Termination
from rewardkit.loop.user_sim.openai_sim import system_prompt
from rewardkit.runs.stats.metrics import task_order

PNG = b"\x89PNG\r\n\x1a\n"
MAX_TOKENS, MAX_TURNS = 32, 3
# Three test-split tasks, two trials each; the short system prompt and no tool specs keep every request far
# inside the tiny model's 8192 positions (swift deploy never answers a longer one, see the report).
TINY = ["--split", "test", "--limit", "3", "--trials", "2", "--no-progress"]


def cli(*args: str | Path) -> tuple[int, str, str]:
    """``rewardkit ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


def records(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]


def summary(out_dir: Path) -> dict[str, Any]:
    return json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))


def pass1(out_dir: Path) -> dict[str, float | None]:
    rows = [json.loads(line) for line in (out_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["task_id"]: r["pass1"] for r in rows}


# -- the tiny model behind swift deploy as the agent -------------------------------------------------------------
@pytest.fixture(scope="module")
def deployed(tiny_agent_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``swift deploy`` of the tiny agent on CPU; yields its base URL."""
    logs = tmp_path_factory.mktemp("deploy")
    with swift_deploy(tiny_agent_model, logs / "deploy.log", "tiny-agent") as base_url:
        yield base_url


@pytest.fixture(scope="module")
def tiny_run(deployed: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """One evaluation of the deployed model with the scripted user: (out dir, exit code, stdout + stderr)."""
    work = tmp_path_factory.mktemp("tiny_eval")
    prompt = work / "system.txt"
    prompt.write_text(SYSTEM, encoding="utf-8")
    out = work / "run"
    rc, stdout, stderr = cli(
        "eval",
        "agent",
        "--agent",
        deployed,
        *TINY,
        "--max-tokens",
        MAX_TOKENS,
        "--max-turns",
        MAX_TURNS,
        "--no-tools",
        "--system-prompt",
        prompt,
        "--out-dir",
        out,
    )
    return out, rc, stdout + stderr


@pytest.mark.e2e
def test_eval_of_a_swift_deploy_agent(deployed: str, tiny_run: tuple[Path, int, str]) -> None:
    out, rc, log = tiny_run
    assert rc == 0, log
    assert "6 valid, 0 infrastructure errors excluded" in log
    s = summary(out)
    # A tiny model's bad output is a failed task, never an infrastructure error.
    assert s["episodes"] == {"total": 6, "valid": 6, "infra_error": 0, "duplicates_replaced": 0}
    assert s["agent"] == {
        "kind": "openai",
        "base_url": deployed,
        "model": "tiny-agent",
        "temperature": 0.0,
        "max_tokens": MAX_TOKENS,
    }
    assert [p["k"] for p in s["pass_hat_k"]] == [1, 2]
    assert all(p["tasks"] == 3 and p["skipped"] == 0 and 0.0 <= p["value"] <= 1.0 for p in s["pass_hat_k"])
    eps = records(out)
    assert len(eps) == 6 and {(r["task_id"], r["trial"]) for r in eps} == {(t, k) for t in pass1(out) for k in range(2)}
    real = {t.value for t in Termination} - {t.value for t in EXCLUDED}
    for r in eps:
        assert r["status"] == "ok" and r["termination"] in real and r["error"] is None, r
        assert r["reward"] in (0.0, 1.0) and 1 <= r["turns"] <= MAX_TURNS
    assert sum(s["termination"].values()) == 6 and not set(s["termination"]) & {t.value for t in EXCLUDED}
    with (out / "tasks.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(r["trials"] == "2" and r["infra_errors"] == "0" for r in rows)
    assert (out / "eval.png").read_bytes().startswith(PNG)

    # The assistant turns are the server's replies: greedy decoding gives them again for the same conversation.
    client = openai.OpenAI(base_url=deployed, api_key="EMPTY", max_retries=0, timeout=60)
    replayed = 0
    for r in eps:
        assert r["messages"][0] == {"role": "system", "content": SYSTEM}
        if r["trial"]:
            continue
        for i, m in enumerate(r["messages"]):
            if m["role"] != "assistant":
                continue
            again = client.chat.completions.create(
                model="tiny-agent", messages=r["messages"][:i], temperature=0.0, max_tokens=MAX_TOKENS
            )
            assert m["content"] == again.choices[0].message.content and m["content"].strip()
            replayed += 1
    assert replayed >= 3


@pytest.mark.e2e
def test_compare_gold_against_the_deployed_model(tiny_run: tuple[Path, int, str], tmp_path: Path) -> None:
    tiny, rc, log = tiny_run
    assert rc == 0, log
    gold = tmp_path / "gold"
    rc, _, err = cli("eval", "agent", "--agent", "gold", *TINY, "--out-dir", gold)
    assert rc == 0, err
    assert summary(gold)["pass_hat_k"][0]["value"] == 1.0  # gold with the scripted user completes everything
    report = tmp_path / "compare.json"
    rc, stdout, err = cli(
        "eval", "compare", gold / "episodes.jsonl", tiny / "episodes.jsonl", "--out", report, "--boot", "200"
    )
    assert rc == 0, err
    result = json.loads(report.read_text(encoding="utf-8"))
    model = pass1(tiny)
    failed = sorted((t for t, p in model.items() if p < 1.0), key=task_order)
    assert failed, "the tiny model completed every task: the comparison has nothing to show"
    assert result["paired_tasks"] == 3 and result["a"]["pass1"] == 1.0
    assert result["diff"] == pytest.approx(sum(model.values()) / 3 - 1.0) and result["diff"] < 0
    assert [row["task_id"] for row in result["regressed"]] == failed and result["improved"] == []
    assert f"regressed ({len(failed)}): {', '.join(failed)}" in stdout


# -- a user simulator killed mid-run, then --resume ---------------------------------------------------------------
class Customer(SimServer):
    """SimServer on a chosen port (a restarted simulator keeps its URL, hence the run's fingerprint)."""

    def __init__(self, port: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._httpd.server_close()
        self._httpd = _Server(("127.0.0.1", port), self._handler())
        self.port, self.base_url = port, f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)


def kill_after(server: SimServer, log: Path, lines: int) -> threading.Thread:
    """Close ``server`` once ``log`` holds ``lines`` episodes (in a thread; the run goes on without it)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and log.read_text(encoding="utf-8").count("\n") >= lines:
                break
            time.sleep(0.005)
        server.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_killed_simulator_is_excluded_and_resume_reruns_only_its_episodes(tmp_path: Path) -> None:
    out, port = tmp_path / "run", free_port()
    args = [
        "eval",
        "agent",
        "--agent",
        "gold",
        "--user",
        f"http://127.0.0.1:{port}/v1",
        "--user-model",
        "sim",
        "--user-retries",
        "0",
        "--user-timeout",
        "5",
        "--workers",
        "1",
        "--split",
        "test",
        "--limit",
        "8",
        "--trials",
        "1",
        "--no-progress",
        "--out-dir",
        str(out),
    ]
    first = Customer(port, delay_s=0.1)  # slow enough that the kill lands mid-run
    with first:
        watcher = kill_after(first, out / "episodes.jsonl", 2)
        rc, stdout, err = cli(*args)
        watcher.join(timeout=60)
    assert rc == 0, err

    before = records(out)
    assert len(before) == 8
    ok = {r["task_id"] for r in before if r["status"] == "ok"}
    down = [r for r in before if r["status"] == "infra_error"]
    assert len(ok) >= 2 and down, [(r["task_id"], r["termination"]) for r in before]
    for r in before:
        if r["status"] == "ok":  # the simulator's replies, then the gold agent's "done" made it stop
            assert r["reward"] == 1.0 and r["termination"] in {"user_stop", "agent_transfer"}, r
            assert {"role": "user", "content": "My email is a@b.c"} in r["messages"]
        else:
            assert r["termination"] == "user_sim_error" and r["reward"] is None and r["tcr"] is None, r
            assert first.base_url in r["error"]
    s = summary(out)
    assert s["episodes"]["infra_error"] == len(down) and s["episodes"]["valid"] == len(ok)
    assert s["termination"]["user_sim_error"] == len(down)
    # pass^1 over valid episodes only: the excluded ones are not failures.
    assert s["pass_hat_k"] == [{"k": 1, "value": 1.0, "tasks": len(ok), "skipped": len(down)}]
    assert s["mean"]["reward"] == 1.0
    assert f"{len(ok)} valid, {len(down)} infrastructure errors excluded" in stdout

    log_before = (out / "episodes.jsonl").read_text(encoding="utf-8")
    with Customer(port) as second:  # the same URL: the same simulator fingerprint, so the run resumes
        rc, stdout, err = cli(*args, "--resume")
    assert rc == 0, err
    log_after = (out / "episodes.jsonl").read_text(encoding="utf-8")
    assert log_after.startswith(log_before)  # appended, nothing rewritten
    rerun = [json.loads(line) for line in log_after[len(log_before) :].splitlines()]
    assert sorted(r["task_id"] for r in rerun) == sorted(r["task_id"] for r in down)
    assert all(r["status"] == "ok" and r["reward"] == 1.0 for r in rerun)
    # The restarted simulator only heard from the episodes that failed before.
    tasks = get_domain("retail").tasks()
    guidelines = get_domain("retail").guidelines()
    prompts = {system_prompt(guidelines, tasks[r["task_id"]]): r["task_id"] for r in before}
    heard = {prompts[body["messages"][0]["content"]] for body in second.requests}
    assert heard == {r["task_id"] for r in down}
    s = summary(out)
    assert (s["episodes"]["total"], s["episodes"]["valid"], s["episodes"]["infra_error"]) == (8, 8, 0)
    assert s["pass_hat_k"] == [{"k": 1, "value": 1.0, "tasks": 8, "skipped": 0}]
    assert "8 valid, 0 infrastructure errors excluded" in stdout


def test_an_existing_out_dir_needs_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        "eval",
        "agent",
        "--agent",
        "gold",
        "--split",
        "test",
        "--limit",
        "1",
        "--trials",
        "1",
        "--no-progress",
        "--out-dir",
        str(out),
    ]
    assert cli(*args)[0] == 0
    log = (out / "episodes.jsonl").read_bytes()
    rc, stdout, err = cli(*args)
    assert rc == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and "--resume" in err, err
    assert (out / "episodes.jsonl").read_bytes() == log
