"""``rewardkit.runs``: K trials through the real loop (``trials``) and task selection (the log: test_episode_log.py).

Episodes run for real: the gold agent, the scripted customer and the retail database. The only
test doubles are a simulator and an agent that fail on chosen tasks, standing in for an endpoint
that is down (a real-HTTP version lives with the user-simulator tests).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.tasks import gold_actions
from rewardkit.loop.agents import AgentError
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.base import Progress, SimulatorError, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.runs.episodes.episode_log import EpisodeLog, RunError
from rewardkit.runs.episodes.selection import select_tasks
from rewardkit.runs.episodes.trials import TrialPlan, run_trials

DOMAIN = get_domain("retail")
RUN = "run-a"
# Three train tasks with different endings: an exchange, a return that must say an output ("10"),
# and a transfer to a human agent.
TASK_IDS = ["0", "2", "10"]
# tau2's gold actions of task 2 include a lookup of a product id that does not exist.
CODES = {"0": {"OK": 5}, "2": {"OK": 10, "NOT_FOUND": 1}, "10": {"OK": 5}}
RECORD_KEYS = {
    "run",
    "task_id",
    "trial",
    "status",
    "reward",
    "tcr",
    "termination",
    "turns",
    "tool_calls",
    "tool_errors",
    "tools",
    "call_codes",
    "gates",
    "error",
    "state_hash",
    "messages",
    "user_flags",
    "checks",
    "diff",
    "closing",
}


# --- run_trials ------------------------------------------------------------------------------------


class CountingFactory:
    """Gold agents, counting the episodes actually started (one agent per episode)."""

    def __init__(self, agent: Callable[[Mapping[str, Any]], Any] = GoldAgent) -> None:
        self.agent = agent
        self.started: list[str] = []

    def __call__(self, task: Mapping[str, Any]) -> Any:
        self.started.append(str(task["id"]))
        return self.agent(task)


def plan(task_ids: list[str], trials: int, factory: CountingFactory, simulator: Any = None) -> TrialPlan:
    return TrialPlan(
        domain=DOMAIN,
        tasks=select_tasks(DOMAIN, "train", task_ids, None)[0],
        trials=trials,
        make_agent=factory,
        simulator=simulator or ScriptedSimulator(),
        limits=RolloutLimits(),
        workers=4,
    )


def keys(records: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((r["task_id"], r["trial"]) for r in records)


def test_gold_records_have_the_documented_schema(tmp_path: Path) -> None:
    factory = CountingFactory()
    log = EpisodeLog(tmp_path / "episodes.jsonl", RUN, resume=False)
    records = run_trials(plan(TASK_IDS, 2, factory), log, progress=False)
    assert keys(records) == sorted((t, k) for t in TASK_IDS for k in (0, 1))
    assert Counter(factory.started) == {t: 2 for t in TASK_IDS}
    tasks = DOMAIN.tasks()
    for r in records:
        assert set(r) == RECORD_KEYS, r.keys()
        actions = gold_actions(tasks[r["task_id"]])
        assert (r["run"], r["status"], r["reward"], r["tcr"], r["error"]) == (RUN, "ok", 1.0, 1.0, None)
        assert r["termination"] == ("agent_transfer" if r["task_id"] == "10" else "user_stop")
        # the user's stop is the closing line, apart from the messages; an agent's transfer leaves none
        assert (r["closing"] is None) == (r["termination"] == "agent_transfer")
        assert r["tools"] == dict(Counter(a["name"] for a in actions))
        assert r["tool_calls"] == len(actions) and r["call_codes"] == CODES[r["task_id"]]
        assert r["tool_errors"] == r["tool_calls"] - r["call_codes"]["OK"]
        assert r["turns"] >= r["tool_calls"]
        assert r["messages"][0] == {"role": "system", "content": DOMAIN.policy()}
        assert [m["role"] for m in r["messages"]].count("tool") == len(actions)
        assert isinstance(r["state_hash"], str) and r["state_hash"]
        assert r["diff"] == [] and r["checks"] and all(c["passed"] for c in r["checks"])  # the gold: why it is 1.0
    # Every record is on disk, one line each, and equal to what run_trials returned.
    on_disk = [json.loads(line) for line in log.path.read_text(encoding="utf-8").splitlines()]
    assert sorted(on_disk, key=lambda r: (r["task_id"], r["trial"])) == sorted(
        records, key=lambda r: (r["task_id"], r["trial"])
    )


def test_resume_runs_only_the_missing_episodes(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    first = CountingFactory()
    run_trials(plan(TASK_IDS[:1], 2, first), EpisodeLog(path, RUN, resume=False), progress=False)
    assert first.started == [TASK_IDS[0]] * 2

    second = CountingFactory()
    records = run_trials(plan(TASK_IDS, 2, second), EpisodeLog(path, RUN, resume=True), progress=False)
    assert Counter(second.started) == {TASK_IDS[1]: 2, TASK_IDS[2]: 2}
    assert keys(records) == sorted((t, k) for t in TASK_IDS for k in (0, 1))
    assert len(path.read_text().splitlines()) == 6

    # A crash while the last line was being written: only that episode runs again.
    lines = path.read_text(encoding="utf-8").splitlines()
    cut = json.loads(lines[-1])
    path.write_text("".join(line + "\n" for line in lines[:-1]) + lines[-1][:40], encoding="utf-8")
    third = CountingFactory()
    records = run_trials(plan(TASK_IDS, 2, third), EpisodeLog(path, RUN, resume=True), progress=False)
    assert third.started == [cut["task_id"]]
    assert len(records) == 6 and all(r["status"] == "ok" for r in records)
    assert all(json.loads(line) for line in path.read_text().splitlines())  # every line parses again

    # Nothing missing: a resumed run starts no episode at all.
    fourth = CountingFactory()
    run_trials(plan(TASK_IDS, 2, fourth), EpisodeLog(path, RUN, resume=True), progress=False)
    assert fourth.started == []


class DownSimulator:
    """The scripted customer, except that for ``failing`` tasks the endpoint is down from reply ``after`` on."""

    name = "http://sim.invalid/v1"

    def __init__(self, failing: set[str], after: int) -> None:
        self.failing, self.after = failing, after
        self.inner = ScriptedSimulator()

    def fingerprint(self) -> str:
        return "down"

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        replies = sum(turn.role == "user" for turn in dialogue)
        if str(task["id"]) in self.failing and replies >= self.after:
            raise SimulatorError(self.name, "connection refused after 3 retries")
        return self.inner.reply(task, dialogue, progress)


class DownAgent:
    """A gold agent whose endpoint fails on its ``after``-th message."""

    def __init__(self, task: Mapping[str, Any], after: int) -> None:
        self.gold, self.after, self.calls = GoldAgent(task), after, 0

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls += 1
        if self.calls > self.after:
            raise AgentError("http://agent.invalid/v1", "no reply after 4 attempt(s)")
        return self.gold(messages)


FAILING = TASK_IDS[1]


SIM_DOWN = "user simulator http://sim.invalid/v1"
AGENT_DOWN = "agent endpoint http://agent.invalid/v1"
N_GOLD = len(gold_actions(DOMAIN.tasks()[FAILING]))


@pytest.mark.parametrize(
    ("failure", "termination", "endpoint", "tool_calls"),
    [
        ("user-at-opening", "user_sim_error", SIM_DOWN, 0),
        # The customer's first answer comes after every gold call ran (they take one turn each).
        ("user-mid-conversation", "user_sim_error", SIM_DOWN, N_GOLD),
        ("agent-mid-conversation", "agent_error", AGENT_DOWN, 2),
    ],
)
def test_infrastructure_failures_are_infra_errors_and_rerun_on_resume(
    tmp_path: Path, failure: str, termination: str, endpoint: str, tool_calls: int
) -> None:
    path = tmp_path / "episodes.jsonl"
    simulator: Any = ScriptedSimulator()
    factory = CountingFactory()
    if failure == "user-at-opening":
        simulator = DownSimulator({FAILING}, after=0)
    elif failure == "user-mid-conversation":
        simulator = DownSimulator({FAILING}, after=1)
    else:
        factory = CountingFactory(lambda task: DownAgent(task, 2) if task["id"] == FAILING else GoldAgent(task))
    records = run_trials(plan(TASK_IDS, 1, factory, simulator), EpisodeLog(path, RUN, resume=False), progress=False)
    by_task = {r["task_id"]: r for r in records}
    failed = by_task.pop(FAILING)
    assert failed["status"] == "infra_error" and failed["termination"] == termination
    assert failed["reward"] is None and failed["tcr"] is None
    assert endpoint in failed["error"]
    assert failed["tool_calls"] == tool_calls  # how far the conversation got before the endpoint failed
    assert all(r["status"] == "ok" and r["reward"] == 1.0 for r in by_task.values())

    healthy = CountingFactory()
    records = run_trials(plan(TASK_IDS, 1, healthy), EpisodeLog(path, RUN, resume=True), progress=False)
    assert healthy.started == [FAILING]
    assert [(r["task_id"], r["status"], r["reward"]) for r in sorted(records, key=lambda r: r["task_id"])] == [
        (t, "ok", 1.0) for t in sorted(TASK_IDS)
    ]
    # The log keeps the failed attempt, and its last word on every episode is ok.
    assert len(path.read_text().splitlines()) == len(TASK_IDS) + 1
    reloaded = EpisodeLog(path, RUN, resume=True)
    assert reloaded.done() == {(t, 0) for t in TASK_IDS}


# --- select_tasks ----------------------------------------------------------------------------------


# Train task 105's only gold write fails (INSUFFICIENT_FUNDS), so a do-nothing agent would match its gold:
# a run leaves it out and says why; the test split's 64 likewise (a gold exchange of a pending order). So are the
# golds that change nothing and name nothing to show (no_evidence): 25 and 57 in train, 65 in test.
GOLD_FAILS = {"train": {"105"}, "test": {"64"}}
NO_EVIDENCE = {"train": {"25", "57"}, "test": {"65"}}
UNUSABLE = {split: GOLD_FAILS[split] | NO_EVIDENCE[split] for split in GOLD_FAILS}
TRAIN = [i for i in DOMAIN.splits()["train"] if i not in UNUSABLE["train"]]
TEST = [i for i in DOMAIN.splits()["test"] if i not in UNUSABLE["test"]]


@pytest.mark.parametrize(
    ("split", "task_ids", "limit", "expected"),
    [
        ("train", None, None, TRAIN),
        ("train", None, 3, TRAIN[:3]),
        ("train", ["10", "0", "2"], None, ["0", "2", "10"]),  # split order, not the order asked
        ("train", ["10", "0", "2"], 2, ["0", "2"]),
        ("train", None, 10_000, TRAIN),
        ("test", None, None, TEST),
    ],
)
def test_select_tasks(split: str, task_ids: list[str] | None, limit: int | None, expected: list[str]) -> None:
    tasks, unusable = select_tasks(DOMAIN, split, task_ids, limit)
    assert [str(t["id"]) for t in tasks] == list(expected)
    # Tasks are checked in split order until the limit is met: an unusable one past the last task taken is not seen.
    order = DOMAIN.splits()[split]
    checked = (
        set(order[: order.index(str(tasks[-1]["id"])) + 1]) if limit is not None and len(tasks) == limit else set(order)
    )
    assert set(unusable) == (UNUSABLE[split] & checked if task_ids is None else set())
    assert all(
        why.startswith("no_evidence: " if i in NO_EVIDENCE[split] else "gold_fails: ") for i, why in unusable.items()
    )
    assert all(t is DOMAIN.tasks()[str(t["id"])] or t == DOMAIN.tasks()[str(t["id"])] for t in tasks)


TEST_ONLY = next(i for i in DOMAIN.splits()["test"] if i not in set(TRAIN))


@pytest.mark.parametrize(
    ("split", "task_ids", "limit", "message"),
    [
        ("nope", None, None, "--split 'nope': retail has splits base, test, train"),
        ("train", ["0", "no-such-task"], None, "--tasks: no-such-task not in the train split of retail"),
        ("train", [TEST_ONLY], None, f"--tasks: {TEST_ONLY} not in the train split of retail"),
        ("train", None, 0, "no tasks selected from the train split of retail"),
        ("train", ["0", "105"], None, "--tasks: task 105 of retail cannot be judged (gold_fails: "),
    ],
)
def test_select_tasks_errors(split: str, task_ids: list[str] | None, limit: int | None, message: str) -> None:
    with pytest.raises(RunError) as info:
        select_tasks(DOMAIN, split, task_ids, limit)
    assert str(info.value).startswith(message) and (message.endswith(": ") or str(info.value) == message)
