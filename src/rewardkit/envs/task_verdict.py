"""A task judged once: whether it can judge an episode, what its gold leaves behind, and what completes it.

Every consumer reads the one :class:`TaskVerdict`: the builder (which tasks become rows), the multi-turn scheduler
and the OpenEnv server (which tasks are played), the task-completion rewards (the :class:`Goal`), ``rewardkit env
check`` (a domain's report) and ``rewardkit tasks generate`` (which proposals are kept). :func:`judge_task` checks,
in order:

1. the task's shape (:func:`~rewardkit.envs.tasks.task_problem`, with the domain's tool schemas);
2. its gold actions on a fresh database, each soft-gated write approved when its user approves, and its script
   (:func:`~rewardkit.envs.tasks.scripted_actions`) likewise. When the tools fail rather than the task (a spec
   domain's simulator that cannot answer, an MCP server gone: ``ToolSimError``, ``ConnectionError``) the verdict is
   ``tool_sim_error`` or ``env_error``, and ``untested``: its episodes may be played, and end as the tools fail.
   Any other exception is a bug in the domain's code: ``gold_raises``;
3. what the replay shows: a gold write that fails (``gold_fails``: the gold state would then be reached by doing
   less), a script that contradicts a declined or refused entry (``bad_outcome_entry``), gold writes that leave
   the state as it was (``no_change``), a gold that changes nothing and names nothing an episode must show
   instead (``no_evidence``, :func:`~rewardkit.envs.tasks.evidence`). A failed gold read is allowed: several tau2
   tasks look up a user who does not exist.

:func:`task_verdict` judges each distinct task once per process (every rollout of a GRPO step, the scheduler's and
the reward's, shares it); :func:`checked_task` reads a dataset cell and raises the verdict's :class:`TaskError`;
:func:`gold_outcome` and :func:`task_goal` are a playable task's gold outcome and
:class:`~rewardkit.envs.outcomes.Goal`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rewardkit.envs import Domain, get_domain
from rewardkit.envs.outcomes import Goal, Outcome, replay
from rewardkit.envs.simulated import ToolSimError
from rewardkit.envs.tasks import (
    NO_EVIDENCE,
    TaskError,
    approves,
    evidence,
    expected_outputs,
    gold_actions,
    gold_entries,
    scripted_actions,
    task_digest,
    task_error,
    task_problem,
)
from rewardkit.envs.tool import ResultCode
from rewardkit.files.cache import SMALL_BUDGET, ByteLRU


@dataclass(frozen=True)
class TaskVerdict:
    """One task judged in one domain (:func:`judge_task`).

    ``problem``: ``(reason, detail)`` when the task cannot judge an episode, else None. ``gold``: its gold actions'
    outcome on a fresh database, with each result's text and what it changed (None when the shape checks stopped
    first or the replay raised). ``script``: each scripted entry's result code, when an entry has an ``outcome``
    (else empty). ``writes``: how many gold actions are the domain's writes. ``untested``: the tools failed, not the
    task; it may be played."""

    task: Any
    problem: tuple[str, str] | None = None
    gold: Outcome | None = None
    script: tuple[str, ...] = ()
    writes: int = 0
    untested: bool = False

    @property
    def playable(self) -> bool:
        """Whether episodes of it may be played and scored: no problem, or only the tools' failure."""
        return self.problem is None or self.untested

    @property
    def changes_state(self) -> bool:
        """Whether the gold actions change the fresh state (when they do not, the goal reads the evidence)."""
        return self.gold is not None and self.gold.state_hash != self.gold.fresh_hash

    @property
    def texts(self) -> tuple[str, ...] | None:
        """Each gold result's text, in order (None: nothing ran)."""
        return None if self.gold is None else tuple(call.text for call in self.gold.calls)

    def failed_calls(self) -> list[tuple[int, str, str]]:
        """``(index in evaluation_criteria.actions, tool, "CODE: message")`` of each gold call that failed."""
        if self.gold is None:
            return []
        pairs = zip(gold_entries(self.task), self.gold.calls, strict=True)
        return [(i, call.name, call.error or "") for (i, _), call in pairs if not call.ok]


def judge_task(domain: Domain, task: Any) -> TaskVerdict:
    """``task``'s verdict in ``domain``: the checks of the module docstring, in order (not cached)."""
    found = task_problem(task, domain.tools, domain.name)
    if found is not None:
        return TaskVerdict(task, found)
    writes = sum(a["name"] in domain.write_tools for a in gold_actions(task))
    try:
        gold = replay(domain, gold_actions(task), approves(task), changes=True, task=task, fresh=True, texts=True)
        script = run_script(domain, task)
    # The tool simulator failed, or the tools' server went away (an MCP server that died or forgot the session,
    # over stdio a process of the replay's own), not the task: its episodes end as tool_sim_error or env_error.
    except ToolSimError as exc:
        return TaskVerdict(task, ("tool_sim_error", f"the gold cannot be replayed: {exc}"), untested=True)
    except ConnectionError as exc:
        return TaskVerdict(task, ("env_error", f"the gold cannot be replayed: {exc}"), untested=True)
    except Exception as exc:  # a bug in the domain's environment or tools: reported with the task, not a traceback
        return TaskVerdict(task, ("gold_raises", f"replaying the gold raised {type(exc).__name__}: {exc}"))
    verdict = TaskVerdict(task, None, gold, script, writes)
    return replace(verdict, problem=_replay_problem(verdict, domain))


def _replay_problem(verdict: TaskVerdict, domain: Domain) -> tuple[str, str] | None:
    task = verdict.task
    for i, name, error in verdict.failed_calls():
        if name in domain.write_tools:
            return "gold_fails", (
                f"evaluation_criteria.actions[{i}]: the gold write {name!r} fails when the gold actions are replayed "
                f"on a fresh database ({error}), so the gold state cannot judge the task"
            )
    problem = _script_problem(task, verdict.script)
    if problem is not None:
        return "bad_outcome_entry", problem
    if verdict.writes and not verdict.changes_state:
        return "no_change", (
            "the gold writes leave the state as it was (state_hash unchanged): doing nothing reaches the gold state; "
            "fix the gold actions' arguments, or drop the writes"
        )
    if not verdict.changes_state and not evidence(task, domain.stop_tools):
        return "no_evidence", NO_EVIDENCE
    return None


def _script_problem(task: Mapping[str, Any], script: Sequence[str]) -> str | None:
    """The first declined entry that the script's replay does not hold for approval, or refused entry that it runs:
    no episode could show it as the task says."""
    for i, action in enumerate(scripted_actions(task)):
        outcome, at = action.get("outcome"), f"evaluation_criteria.actions[{i}]"
        held = ResultCode.APPROVAL_REQUIRED.value
        if outcome == "declined" and script[i] != held:
            return (
                f"{at}: the declined entry {action['name']!r} comes back {script[i]} when the script is replayed, not "
                f"{held}: no episode can propose it and have it declined; name a soft-gated write, or drop 'outcome'"
            )
        if outcome == "refused" and script[i] == ResultCode.OK.value:
            return (
                f"{at}: the refused entry {action['name']!r} comes back OK when the script is replayed (its user "
                "answering approvals): the harness runs it; name a write a gate refuses, or drop the entry"
            )
    return None


def run_script(domain: Domain, task: Mapping[str, Any]) -> tuple[str, ...]:
    """The result code of each of ``task``'s scripted actions (its declined and refused entries in their places) on a
    fresh environment of ``domain``, each call held for approval approved when its user approves, as the gold
    agent's conversation runs them. Empty when no entry has an ``outcome`` (the script is then the gold)."""
    actions = scripted_actions(task)
    if not any("outcome" in a for a in actions):
        return ()
    with domain.env_for(task) as env:
        return tuple(r.code.value for r in env.replay(actions, approve=approves(task)))


# (domain, the task's JSON) -> its verdict. Every rollout of a GRPO step asks for its row's task (the scheduler, then
# the reward), and a step holds each task 8 times or more: a task is judged once per process. Bounded twice: 4096
# tasks (tau2 retail has 114) and a quarter of $REWARDKIT_CACHE_MB in bytes. An untested verdict is not kept: the
# tools may answer next time.
VERDICTS = ByteLRU(SMALL_BUDGET, maxsize=4096)


def task_verdict(domain: str, cell: Any) -> TaskVerdict:
    """:func:`judge_task` of the task in ``cell`` (an object or its JSON text) in the domain named ``domain``, once
    per distinct task per process. The task judged is the cell as JSON reads it (a tuple is a list, a key a string,
    the keys in their order: a simulated domain's memory is written in it): the dataset's form, whatever object
    carried it; a cell JSON cannot hold is ``bad_task``. An object and its JSON text are one task."""
    if isinstance(cell, str):
        text = cell
    else:
        try:
            text = json.dumps(cell, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            found = ("bad_task", f"the task is not JSON ({type(exc).__name__}: {str(exc)[:80]})")
            return TaskVerdict(cell, found)
    return VERDICTS.get((domain, text), lambda: _judged(domain, text), keep=lambda verdict: not verdict.untested)


def _judged(domain: str, text: str) -> TaskVerdict:
    try:
        task = json.loads(text)
    except (ValueError, RecursionError):
        return TaskVerdict(text, ("bad_task", f"holds a string that is not JSON: {text[:80]!r}"))
    return judge_task(get_domain(domain), task)


def checked_task(cell: Any, at: str, domain: str) -> Mapping[str, Any]:
    """The task in ``cell`` (an object or its JSON), playable in ``domain`` (:func:`task_verdict`), else a
    :class:`TaskError` naming ``at``: the same read-only task for every rollout of it."""
    verdict = task_verdict(domain, cell)
    if not verdict.playable:
        assert verdict.problem is not None  # not playable: it has one
        raise task_error(at, verdict.problem)
    return verdict.task  # an object: task_problem passed


def gold_outcome(domain: str, task: Any) -> Outcome:
    """The gold outcome of a playable ``task`` (an object or its JSON text) in ``domain``: ToolSimError or
    ConnectionError when the tools fail on it (an episode then ends as they fail), TaskError when it is not
    playable."""
    return _playable(domain, task).gold  # type: ignore[return-value]  # a playable, tested verdict has its gold


def task_goal(domain: str, task: Any) -> Goal:
    """``task``'s :class:`~rewardkit.envs.outcomes.Goal` in ``domain``: the gold's final state, the outputs to say,
    when the gold changes nothing the evidence to show, and the gold writes that succeed (errors as
    :func:`gold_outcome`)."""
    verdict = _playable(domain, task)
    gold, found = verdict.gold, verdict.task
    assert gold is not None  # _playable: tested
    played = get_domain(domain)
    stops = played.stop_tools
    items = () if verdict.changes_state else tuple(evidence(found, stops))
    stray = frozenset() if any(a["name"] in stops for a in scripted_actions(found)) else frozenset(stops)
    pairs = zip(gold_actions(found), gold.calls, strict=True)
    writes = tuple(action for action, call in pairs if action["name"] in played.write_tools and call.ok)
    return Goal(gold.state_hash, tuple(expected_outputs(found)), items, stray, writes, task_digest(found))


def _playable(domain: str, task: Any) -> TaskVerdict:
    """The verdict of a playable task whose gold ran; else what its episode ends on, or a TaskError."""
    verdict = task_verdict(domain, task)
    if verdict.gold is None or not verdict.playable:
        reason, detail = verdict.problem or ("", "")
        failures = {"tool_sim_error": ToolSimError, "env_error": ConnectionError} if verdict.untested else {}
        raise failures.get(reason, TaskError)(detail)
    return verdict
