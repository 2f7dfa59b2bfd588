"""A run that is stopped (Ctrl-C, SIGTERM, a failing log, a bug in one episode) stops within a second or two,
keeps every finished episode and says how to resume; ``--resume`` then runs only the rest.

``run_episodes`` is tested in-process with gold agents that can be slowed or broken; ``synth agent`` and
``eval agent`` as real subprocesses against a slow agent endpoint (``SimServer(delay_s=...)``), signalled
once a few episodes are in the log.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from sim_server import SimServer

from rewardkit.envs import get_domain
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

DOMAIN = get_domain("retail")
TASKS = [DOMAIN.tasks()[i] for i in DOMAIN.splits()["train"][:8]]


class Agents:
    """Gold agents; ``slow`` tasks sleep ``delay`` per call, ``broken`` ones raise (a bug, not an endpoint)."""

    def __init__(self, slow: Sequence[str] = (), delay: float = 0.0, broken: Sequence[str] = ()) -> None:
        self.slow, self.delay, self.broken = set(slow), delay, set(broken)
        self.started: list[str] = []
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, task: Mapping[str, Any]) -> Any:
        task_id = str(task["id"])
        self.started.append(task_id)
        gold = GoldAgent(task)

        def agent(messages: Sequence[Mapping[str, Any]]) -> str:
            with self._lock:
                self.calls += 1
            if task_id in self.broken:
                raise RuntimeError(f"bug in the agent of task {task_id}")
            if task_id in self.slow:
                time.sleep(self.delay)
            return gold(messages)

        return agent


def run(agents: Agents, on_result: Any, workers: int = 2, grace_s: float = 1.0) -> list[EpisodeResult]:
    return run_episodes(DOMAIN, TASKS, agents, ScriptedSimulator(), RolloutLimits(), workers, None, on_result, grace_s)


def test_an_unstopped_run_hands_over_every_episode_in_task_order() -> None:
    seen: list[str] = []
    results = run(Agents(), lambda i, r: seen.append(r.task_id), workers=3)
    assert [r.task_id for r in results] == [str(t["id"]) for t in TASKS]
    assert sorted(seen) == sorted(r.task_id for r in results)  # each once, as it ended


class Stop(BaseException):
    """What the caller's thread meets: KeyboardInterrupt, or the CLI's SIGTERM (a KeyboardInterrupt too)."""


@pytest.mark.parametrize("error", [KeyboardInterrupt, Stop, OSError], ids=["sigint", "sigterm", "full-disk"])
def test_a_stop_in_the_callers_thread_starts_nothing_queued(error: type[BaseException]) -> None:
    agents = Agents(slow=[str(t["id"]) for t in TASKS], delay=0.05)
    seen: list[str] = []
    at_stop: list[int] = []

    def on_result(i: int, result: EpisodeResult) -> None:
        seen.append(result.task_id)
        if len(seen) == 2:
            at_stop.append(len(agents.started))
            raise error("stop")

    with pytest.raises(error):
        run(agents, on_result)
    # Nothing starts after the stop (a start takes a 50 ms agent call to finish an episode, far more than the
    # microseconds between a worker's check and its start), so the queued tasks behind it never run.
    assert len(agents.started) == at_stop[0] < len(TASKS)
    # The 2 handed over before the stop, and any in flight that finished within the grace.
    assert len(seen) >= 2 and set(seen) <= set(agents.started)


def test_a_bug_in_one_episode_stops_the_run_and_keeps_the_finished_ones() -> None:
    broken = str(TASKS[3]["id"])
    seen: list[str] = []
    agents = Agents(broken=[broken])
    with pytest.raises(RuntimeError, match=f"bug in the agent of task {broken}"):
        run(agents, lambda i, r: seen.append(r.task_id), workers=1)
    # One worker runs the tasks in order: the three before the broken one finished and were handed over.
    assert seen == [str(t["id"]) for t in TASKS[:3]]
    assert broken not in seen and len(agents.started) == 4


def test_an_episode_in_flight_past_the_grace_is_abandoned_and_calls_no_more() -> None:
    from rewardkit.envs.tasks import gold_actions

    slow = str(TASKS[1]["id"])
    assert len(gold_actions(TASKS[1])) >= 2  # at least 3 agent calls of 0.6 s: it cannot end within the grace
    agents = Agents(slow=[slow], delay=0.6)
    seen: list[str] = []

    def on_result(i: int, result: EpisodeResult) -> None:
        seen.append(result.task_id)
        raise KeyboardInterrupt  # the first episode to finish stops the run

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run(agents, on_result, grace_s=0.2)
    elapsed = time.monotonic() - start
    calls = agents.calls
    # Task 0 ends at once and stops the run; the slow task 1 needs >= 3 x 0.6 s: the run returned after its
    # 0.2 s grace, not after the slow episode.
    assert elapsed < 0.6 * 3, elapsed
    assert slow not in seen
    time.sleep(0.8)  # the call in flight returns; the episode sees the stop and makes no other
    assert agents.calls == calls


# --- the CLI as a user runs it: a slow agent endpoint, a signal after a few episodes ------------------------

N = 8  # tasks; 2 workers and a 0.3 s agent make each episode take about a second


def command(kind: str, url: str, out: Path) -> list[str]:
    loop = [
        "--agent",
        url,
        "--agent-model",
        "m",
        "--limit",
        str(N),
        "--trials",
        "1",
        "--workers",
        "2",
        "--max-turns",
        "2",
        "--no-progress",
    ]
    where = ["--out", str(out / "sft.jsonl")] if kind == "synth" else ["--split", "test", "--out-dir", str(out)]
    return [sys.executable, "-m", "rewardkit.cli", kind, "agent", *loop, *where]


def default_sigint() -> None:
    """Run in the child before exec. A script's background job (``cmd &``) starts with SIGINT ignored and hands that
    on, and Python installs its KeyboardInterrupt handler only for a SIGINT that is not ignored: the run would
    never see the signal this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def lines(path: Path) -> list[dict[str, Any]]:
    """The complete records of a log that may be mid-append (a line is complete once its newline is written)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1]]


@pytest.mark.parametrize(
    ("kind", "sig", "code", "said"),
    [
        ("synth", signal.SIGINT, 130, "interrupted"),
        ("eval", signal.SIGINT, 130, "interrupted"),
        ("synth", signal.SIGTERM, 143, "stopped by SIGTERM"),
        ("eval", signal.SIGTERM, 143, "stopped by SIGTERM"),
    ],
    ids=["synth-sigint", "eval-sigint", "synth-sigterm", "eval-sigterm"],
)
def test_a_signalled_run_stops_at_once_keeps_its_episodes_and_resumes(
    kind: str, sig: signal.Signals, code: int, said: str, tmp_path: Path
) -> None:
    log = tmp_path / ("sft.episodes.jsonl" if kind == "synth" else "episodes.jsonl")
    with SimServer(delay_s=0.3) as server:
        cmd = command(kind, server.base_url, tmp_path)
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
        )
        deadline = time.monotonic() + 120
        while len(lines(log)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        calls = server.count
        time.sleep(0.5)
        assert server.count == calls  # nothing is left calling the agent
        kept = lines(log)
        assert proc.returncode == code, err
        # The grace is 1 s; the rest is the interpreter's exit, which a loaded 2-core machine can stretch.
        assert took < 5, took
        (line,) = err.splitlines()
        assert line.startswith(f"rewardkit {kind} agent: {said}; {len(kept)} finished episode(s) are kept in {log}")
        assert line.endswith("rerun the same command with --resume to run the rest")
        assert 2 <= len(kept) < N and len({(r["task_id"], r["trial"]) for r in kept}) == len(kept)
        assert not log.with_name(log.name + ".lock").exists()  # the lock went with the run
        # The same endpoint (its URL is part of the run's fingerprint), for the rest.
        done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    after = lines(log)
    # The resumed run ran only the missing episodes: each (task, trial) once, the first ones unchanged.
    assert after[: len(kept)] == kept and len(after) == N
    assert len({(r["task_id"], r["trial"]) for r in after}) == N
