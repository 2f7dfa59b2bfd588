"""Random fault schedules over a real agent endpoint, through the run engine of ``synth agent`` and ``eval agent``.

One SimServer plays the agent; each episode's calls get the faults Hypothesis draws for them (keyed on the
episode's opening line, the call's place in the conversation and the attempt). Whatever the schedule:

- no traceback, and every episode gets a record;
- an episode is infrastructure (``agent_error``, excluded) exactly when one of its calls failed at the
  transport or server level on every attempt; each call is tried at most ``1 + retries`` times, and an
  attempt that got a reply (of any shape) is the call's last;
- every other episode is scored: reward 0.0 or 1.0, never None;
- ``--resume`` (the same log, the server healthy again) reruns exactly the infrastructure episodes.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_server import MODEL_FAULTS, SERVER_FAULTS, SimServer

from rewardkit.envs import get_domain
from rewardkit.loop.agents import make_agent_factory
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.user_sim.base import GREETING, Progress, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.spec import RunSpec, build_plan
from rewardkit.runs.episodes.trials import run_trials

RETAIL = get_domain("retail")
# Train tasks: 24 needs nothing done but the two materials said (a whole REPLY completes it, 1.0); 50 (a transfer)
# and 0 need tool calls this agent never makes (0.0 after the turn limit). Both rewards occur.
TASK_IDS = ("24", "50", "0")
MAX_TURNS = 3  # agent calls per episode
RETRIES = 1  # so each call has 2 attempts
TIMEOUT_S = 2.0  # "slow" answers after 10 s: a timeout; a healthy local reply is far under 2 s
REPLY = "Everything you asked for is done: the t-shirts are polyester and cotton."


def opening(task_id: str) -> str:
    task = RETAIL.tasks()[task_id]
    return ScriptedSimulator().reply(task, [Turn("agent", GREETING)], Progress())


OPENINGS = {opening(t): t for t in TASK_IDS}
assert len(OPENINGS) == len(TASK_IDS)  # the opening line tells the server whose call it is

FAULT = st.sampled_from(sorted(["ok", *SERVER_FAULTS, *MODEL_FAULTS]))
# (task, call index, attempt) -> fault; anything not drawn is "ok".
SCHEDULE = st.dictionaries(
    st.tuples(st.sampled_from(TASK_IDS), st.integers(0, MAX_TURNS - 1), st.integers(0, RETRIES)), FAULT, max_size=12
)


class Keyed:
    """The server's fault schedule: by episode (its opening line), call (assistant turns so far) and attempt."""

    def __init__(self, schedule: dict[tuple[str, int, int], str]) -> None:
        self.schedule = schedule
        self.seen: list[tuple[str, int, str]] = []  # (task, call, fault) per request, in arrival order
        self._attempts: Counter[tuple[str, int]] = Counter()

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        task = OPENINGS[next(m["content"] for m in messages if m["role"] == "user")]
        call = sum(m["role"] == "assistant" for m in messages)
        attempt = self._attempts[(task, call)]
        self._attempts[(task, call)] += 1
        fault = self.schedule.get((task, call, attempt), "ok")
        self.seen.append((task, call, fault))
        return fault


def infrastructure(seen: list[tuple[str, int, str]]) -> set[str]:
    """The tasks with a call whose every attempt met a server fault; checks the retry rule on the way."""
    attempts: dict[tuple[str, int], list[str]] = {}
    for task, call, fault in seen:
        attempts.setdefault((task, call), []).append(fault)
    failed = set()
    for (task, _), faults in attempts.items():
        assert len(faults) <= 1 + RETRIES, faults  # never more than the retries allow
        # every attempt but the last met a server fault: a reply of any shape is taken at once
        assert all(f in SERVER_FAULTS for f in faults[:-1]), faults
        if len(faults) == 1 + RETRIES and all(f in SERVER_FAULTS for f in faults):
            failed.add(task)
    return failed


def run(server: SimServer, log_path: Path, resume: bool) -> list[dict[str, Any]]:
    spec = RunSpec(
        domain="retail",
        agent=server.base_url,
        agent_model="m",
        split="train",
        tasks=TASK_IDS,
        max_turns=MAX_TURNS,
        agent_retries=RETRIES,
        agent_timeout=TIMEOUT_S,
        workers=len(TASK_IDS),
    )
    plan, meta = build_plan(spec)
    # The spec's agent, with a 10 ms backoff instead of 1 s between attempts (the run takes seconds, not minutes).
    make_agent, described = make_agent_factory(
        server.base_url,
        RETAIL.tool_specs(),
        model="m",
        settings=EndpointSettings(retries=RETRIES, timeout_s=TIMEOUT_S, backoff_s=0.01, concurrency=len(TASK_IDS)),
    )
    assert described == meta["agent"]  # the same agent as the spec describes
    with EpisodeLog(log_path, meta["run"], resume=resume) as log:
        return run_trials(dataclasses.replace(plan, make_agent=make_agent), log, progress=False)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=SCHEDULE)
def test_any_fault_schedule_is_scored_or_excluded_and_resume_reruns_the_excluded(schedule: dict) -> None:
    keyed = Keyed(schedule)
    with tempfile.TemporaryDirectory() as tmp, SimServer(faults=keyed, models=["m"], reply=REPLY, slow_s=10) as server:
        log_path = Path(tmp) / "episodes.jsonl"
        records = run(server, log_path, resume=False)
        assert sorted(r["task_id"] for r in records) == sorted(TASK_IDS)  # every episode has a record
        expected = infrastructure(keyed.seen)
        excluded = {r["task_id"] for r in records if r["status"] == "infra_error"}
        assert excluded == expected, (keyed.seen, records)
        for r in records:
            if r["task_id"] in expected:
                assert (r["termination"], r["reward"]) == ("agent_error", None)
                assert server.base_url in r["error"]
            else:
                assert r["status"] == "ok" and r["reward"] in (0.0, 1.0), r
        # --resume with the server healthy again: exactly the excluded episodes run, and now they score
        healthy = Keyed({})
        server.faults = healthy
        resumed = run(server, log_path, resume=True)
        assert {task for task, _, _ in healthy.seen} == expected
        assert all(r["status"] == "ok" and r["reward"] in (0.0, 1.0) for r in resumed)
        assert sorted(r["task_id"] for r in resumed) == sorted(TASK_IDS)


def test_the_schedule_reaches_every_fault() -> None:
    """The property test can fail: a schedule of server faults on both attempts of a first call is excluded, a
    schedule of model faults is scored (the reward 24 earns without them is 1.0; an empty first reply ends 50, 0.0)."""
    keyed = Keyed({("24", 0, 0): "die", ("24", 0, 1): "not_json", ("50", 0, 0): "empty", ("0", 0, 0): "http_500"})
    with tempfile.TemporaryDirectory() as tmp, SimServer(faults=keyed, models=["m"], reply=REPLY) as server:
        records = {r["task_id"]: r for r in run(server, Path(tmp) / "episodes.jsonl", resume=False)}
    assert infrastructure(keyed.seen) == {"24"}
    assert (records["24"]["status"], records["24"]["termination"]) == ("infra_error", "agent_error")
    assert (records["50"]["termination"], records["50"]["reward"]) == ("empty_reply", 0.0)
    # 0's first call failed once (500), then got its reply: not infrastructure; 0 needs tool calls, so 0.0
    assert (records["0"]["status"], records["0"]["reward"]) == ("ok", 0.0)
