"""What a sequence of tool calls leaves behind on a fresh database, and a task's gold outcome, once per process.

An :class:`Outcome` is the final state hash plus every call with its result. :func:`gold_outcome` replays a task's
gold actions on a fresh copy of the domain's database; the rollout loop, the multi-turn scheduler and the
task-completion rewards all take it from one per-process cache, so a task replays once however many rollouts it
has. :func:`task_check` and :func:`checked_task` are the task checks of :mod:`rewardkit.envs.tasks` with the
domain's tool schemas, plus that gold replay (a gold write that fails is ``gold_fails``; a gold that changes nothing
and names no evidence is ``no_evidence``).

:class:`Goal` is the one completion rule: the task-completion rewards, the episode's progress (the scripted user's
stop) and the multi-turn scheduler all judge an episode by :meth:`Goal.reached`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.envs import Domain, get_domain
from rewardkit.envs.approvals import agent_rows, decided_rows, gate_counts, user_decision
from rewardkit.envs.harness import StatefulEnvironment
from rewardkit.envs.simulated import ToolSimError
from rewardkit.envs.state_diff import Changes, units
from rewardkit.envs.tasks import (
    Evidence,
    approves,
    communicated_texts,
    error_text,
    evidence,
    expected_outputs,
    gold_actions,
    gold_problem,
    read_task,
    scripted_actions,
    task_error,
    task_problem,
)
from rewardkit.envs.tool import IDEMPOTENCY_KEY, ResultCode
from rewardkit.envs.tool_calls import tool_calls
from rewardkit.files.cache import SMALL_BUDGET, ByteLRU


@dataclass(frozen=True)
class Call:
    name: str
    arguments: Mapping[str, Any]  # without the idempotency key
    ok: bool
    error: str | None = field(default=None, compare=False)  # "CODE: message" of a failed replayed call


@dataclass(frozen=True)
class Outcome:
    state_hash: str
    calls: tuple[Call, ...]
    approvals: int = 0  # requests the user approved on the way (a single-turn completion can hold none)
    changes: Changes | None = field(default=None, compare=False)  # what differs from the fresh state, when asked for
    declined: tuple[Call, ...] = ()  # the agent's calls held for approval whose request the user declined
    fresh_hash: str | None = field(default=None, compare=False)  # the state before the calls, when asked for


def matches(action: Mapping[str, Any], call: Call, held: bool = False) -> bool:
    """tau2's comparison of a gold action and a call: same tool, equal arguments (only ``compare_args`` when the
    action lists them); the call succeeded, or with ``held``, whatever its result (a declined call never ran)."""
    if call.name != action["name"] or not (call.ok or held):
        return False
    keys = action.get("compare_args")
    gold = without_key(action.get("arguments") or {})  # a call is compared without its key (``_call``, ``_audited``)
    if keys is None:
        return dict(call.arguments) == gold
    return {k: call.arguments.get(k) for k in keys} == {k: gold.get(k) for k in keys}


def recorded_outcome(state_hash: str, audit: Sequence[Any]) -> Outcome:
    """The outcome an environment's own record gives: its state hash, the agent's calls in its audit (not the user's
    decisions) and the calls whose approval request the user declined."""
    rows = agent_rows(list(audit))
    calls = tuple(_audited(a, a.get("code") == ResultCode.OK.value) for a in rows)
    return Outcome(state_hash, calls, declined=declined_calls(audit))


def declined_calls(audit: Sequence[Any]) -> tuple[Call, ...]:
    """The agent's calls that came back APPROVAL_REQUIRED and whose request the user then declined
    (``decline_request``, OK), from an audit."""
    user = decided_rows(list(audit))
    declined = {a.get("request") for a in user if a.get("tool") == "decline_request"} - {None}
    held = [a for a in agent_rows(list(audit)) if a.get("code") == ResultCode.APPROVAL_REQUIRED.value]
    return tuple(_audited(a, False) for a in held if a.get("request") in declined)


def _audited(row: Mapping[str, Any], ok: bool) -> Call:
    arguments = row.get("arguments")
    return Call(str(row.get("tool")), without_key(arguments if isinstance(arguments, Mapping) else {}), ok)


def without_key(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as calls are compared: without the idempotency key."""
    return {k: v for k, v in arguments.items() if k != IDEMPOTENCY_KEY}


def replay(
    domain: str,
    calls: Sequence[Any],
    approve: bool = False,
    changes: bool = False,
    task: Mapping[str, Any] | None = None,
    fresh: bool = False,
) -> Outcome:
    """Run ``calls`` (ToolCalls or {"name", "arguments"} mappings) on a fresh copy of ``domain``'s database (``task``'s
    memory, on a simulated domain); with ``approve``, each call held for approval is approved as its user would and
    sent again (``harness.replay``); with ``changes``, the outcome keeps what differs from the fresh state
    (:mod:`rewardkit.envs.state_diff`); with ``fresh``, the state hash before the calls."""
    with get_domain(domain).env_for(task) as env:
        before = env.state_hash() if fresh else None
        if approve:  # a held call leaves its refusal and the user's approval first: keep each call's last row
            pairs = []
            for call in calls:
                result = env.replay([call], approve=True)[0]
                pairs.append((env.audit()[-1], result))
        else:
            results = env.replay(calls)
            pairs = list(zip(env.audit(), results, strict=True))
        approved = gate_counts(env.audit())["approved"] if approve else 0
        changed = _changes(env) if changes else None
        return Outcome(env.state_hash(), tuple(_call(a, r) for a, r in pairs), approved, changed, fresh_hash=before)


def replay_conversation(
    domain: str, messages: Sequence[Any], changes: bool = False, task: Mapping[str, Any] | None = None
) -> Outcome:
    """The agent's calls in ``messages`` on a fresh copy (``task``'s memory, on a simulated domain), in order, each
    user turn's decision (its ``###APPROVE###`` or ``###DECLINE###``) taken on the requests waiting at that point, as
    the live episode took it."""
    if not any(_decision(m) for m in messages):  # nothing decided: the calls alone
        return replay(domain, tool_calls(messages), changes=changes, task=task)
    with get_domain(domain).env_for(task) as env:
        results = []
        for message in messages:
            decision = _decision(message)
            for request in env.pending_approvals() if decision else ():
                env.user_call(decision, {"request_id": request["id"]})
            results += env.replay(tool_calls([message]))
        audit = env.audit()
        pairs = zip(agent_rows(audit), results, strict=True)
        changed = _changes(env) if changes else None
        calls = tuple(_call(a, r) for a, r in pairs)
        return Outcome(env.state_hash(), calls, changes=changed, declined=declined_calls(audit))


def _changes(env: StatefulEnvironment) -> Changes:
    """What the environment's writes changed: its own tracking, else every unit of its export."""
    tracked = env.changes()
    return units(env.export()) if tracked is None else tracked


def _call(row: Mapping[str, Any], result: Any) -> Call:
    """One call as outcomes compare it: its audit row's tool and arguments (key dropped), and its result."""
    return Call(row["tool"], without_key(row["arguments"]), result.ok, None if result.ok else error_text(result))


def _decision(message: Any) -> str | None:
    """The user-side tool a user message asks for, or None (any other message, the agent's included)."""
    if not isinstance(message, Mapping) or message.get("role") != "user" or not isinstance(message.get("content"), str):
        return None
    return user_decision(message["content"])


# (domain, gold actions as JSON) -> Outcome. It grows with the distinct tasks in the data, so it is bounded twice:
# 4096 tasks (tau2 retail has 114) and a quarter of $REWARDKIT_CACHE_MB in bytes. An entry is a task's gold calls
# and their arguments, typically a few KB, so the count is what binds; the bytes guard against unusual data.
GOLD_OUTCOMES = ByteLRU(SMALL_BUDGET, maxsize=4096)
SCRIPT_CODES = ByteLRU(SMALL_BUDGET, maxsize=4096)  # the same keys, for the scripted actions' result codes
GOLD_CHANGES = ByteLRU(SMALL_BUDGET, maxsize=4096)  # the same keys, for what the gold changed (the viewer's diff)


def _replay_key(domain: str, task: Mapping[str, Any], actions: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """What a replay of ``actions`` for ``task`` depends on: the calls, the user's answer, a simulated task's memory."""
    memory = json.dumps(task, sort_keys=True) if get_domain(domain).simulation is not None else None  # per task
    return (domain, json.dumps(actions, sort_keys=True), approves(task), memory)


def gold_outcome(domain: str, task: Mapping[str, Any]) -> Outcome:
    """The outcome of ``task``'s gold actions on a fresh copy of ``domain``'s database, its soft-gated writes approved
    when its user approves (cached per process)."""
    return GOLD_OUTCOMES.get(_replay_key(domain, task, gold_actions(task)), lambda: replay_gold(domain, task))


def run_script(domain: Domain, task: Mapping[str, Any]) -> tuple[str, ...]:
    """The result code of each of ``task``'s scripted actions (its declined and refused entries in their places) on a
    fresh environment of ``domain``, each call held for approval approved when its user approves, as the gold
    agent's conversation runs them: what :func:`~rewardkit.envs.tasks.gold_problem` checks the entries against.
    Empty when no entry has an ``outcome`` (the script is then the gold); not cached."""
    actions = scripted_actions(task)
    if not any("outcome" in a for a in actions):
        return ()
    with domain.env_for(task) as env:
        return tuple(r.code.value for r in env.replay(actions, approve=approves(task)))


def script_codes(domain: str, task: Mapping[str, Any]) -> tuple[str, ...]:
    """:func:`run_script` in ``domain``, once per task per process (as :func:`gold_outcome`)."""
    key = _replay_key(domain, task, scripted_actions(task))
    return SCRIPT_CODES.get(key, lambda: run_script(get_domain(domain), task))


def gold_changes_state(domain: str, task: Mapping[str, Any]) -> bool:
    """Whether ``task``'s gold actions change a fresh copy of ``domain``'s database (read off the cached gold
    outcome). When they do not, the fresh state is the gold's, and doing nothing reaches it: what the episode shows
    (:func:`~rewardkit.envs.tasks.evidence`) must tell the task done."""
    gold = gold_outcome(domain, task)
    return gold.state_hash != gold.fresh_hash


def replay_gold(domain: str, task: Mapping[str, Any], changes: bool = False) -> Outcome:
    """``task``'s gold actions on a fresh copy of ``domain``'s database, its soft-gated writes approved when its user
    approves (not cached; with ``changes``, what they changed too)."""
    return replay(domain, gold_actions(task), approves(task), changes=changes, task=task, fresh=True)


def gold_changes(domain: str, task: Mapping[str, Any]) -> Changes:
    """What ``task``'s gold actions change on a fresh copy of ``domain``'s database: the other side of an episode's
    diff (cached per process, as :func:`gold_outcome`)."""
    key = _replay_key(domain, task, gold_actions(task))
    found = GOLD_CHANGES.get(key, lambda: replay_gold(domain, task, changes=True).changes)
    assert found is not None  # asked for
    return found


def run_gold(domain: Domain, task: Mapping[str, Any]) -> tuple[list[Any], bool]:
    """The results of ``task``'s gold actions on a fresh environment of ``domain`` (``env_for(task)``, its soft-gated
    writes approved when its user approves), and whether they changed the state; not cached (``env check`` and
    ``tasks generate`` read every result)."""
    with domain.env_for(task) as env:
        before = env.state_hash()
        results = env.replay(gold_actions(task), approve=approves(task))
        return results, env.state_hash() != before


def task_check(task: Mapping[str, Any], domain: str) -> tuple[str, str] | None:
    """``(reason, detail)`` of what is wrong with ``task`` in ``domain``, else None: the shared task checks with the
    domain's tool schemas, then the gold replay (a failed gold write is ``gold_fails``). For a run that selects
    tasks and counts bad ones."""
    problem = task_problem(task, get_domain(domain).tools, domain)
    if problem is None:
        try:
            problem = replayed_problem(domain, task)
        # The tool simulator failed, or the tools' server went away (an MCP server that died or forgot the session,
        # over stdio a process of the replay's own), not the task: its episodes end as tool_sim_error or env_error.
        except (ToolSimError, ConnectionError):
            return None
    return problem


def replayed_problem(domain: str, task: Mapping[str, Any]) -> tuple[str, str] | None:
    """:func:`~rewardkit.envs.tasks.gold_problem` of a task that passed ``task_problem``, from its cached gold
    outcome and script replay in ``domain``. A ToolSimError (a spec domain's simulator) is the caller's to judge."""
    found = get_domain(domain)
    replayed = [(c.ok, c.error) for c in gold_outcome(domain, task).calls]
    changes, script = gold_changes_state(domain, task), script_codes(domain, task)
    return gold_problem(
        task, replayed, found.write_tools, changes_state=changes, stop_tools=found.stop_tools, script=script
    )


# (domain, a task cell's JSON) -> the task read and checked. Every rollout of a GRPO step checks its row's task,
# and a step holds each task 8 times or more: a cell passes its checks once per process. Failures are not kept.
CHECKED_TASKS = ByteLRU(SMALL_BUDGET, maxsize=4096)


def checked_task(cell: Any, at: str, domain: str) -> Mapping[str, Any]:
    """The task in ``cell`` (an object or its JSON), checked by :func:`task_check`; a TaskError names ``at``.
    Checked once per distinct cell and shared: the same read-only task for every rollout of it."""
    try:
        key = (domain, cell if isinstance(cell, str) else json.dumps(cell, sort_keys=True))
    except (TypeError, ValueError):  # not JSON: read_task says what is wrong with it
        key = None
    return CHECKED_TASKS.get(key, lambda: _checked(cell, at, domain))


def _checked(cell: Any, at: str, domain: str) -> Mapping[str, Any]:
    task = read_task(cell, at, get_domain(domain).tools, domain)
    problem = task_check(task, domain)
    if problem is not None:
        raise task_error(at, problem)
    return task


@dataclass(frozen=True)
class Goal:
    """What completes a task (:func:`task_goal`): the gold's final state hash, the outputs to say, when the gold
    changes nothing the evidence to show (:func:`~rewardkit.envs.tasks.evidence`; empty when the gold changes the
    state, which then tells the task done by itself), and the stop tools no call may make (the domain's, when the
    task's script makes none: a transfer there ends the conversation before its end)."""

    state_hash: str
    outputs: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    stray_stops: frozenset[str] = frozenset()

    @property
    def needs_calls(self) -> bool:
        """Whether :meth:`reached` reads the episode's calls (else its state hash alone)."""
        return bool(self.evidence or self.stray_stops)

    def shown(self, said: Sequence[str], agent: Outcome) -> list[bool]:
        """Per evidence item: did the episode show it? ``said``: the agent's user-facing texts; ``agent``: its
        outcome with its calls and the calls the user declined. A refused entry is shown only beside every other
        item shown (doing nothing does not make it either)."""
        found = [_shown(item, said, agent) for item in self.evidence]
        rest = all(ok for item, ok in zip(self.evidence, found, strict=True) if item.kind != "refused")
        return [ok and (item.kind != "refused" or rest) for item, ok in zip(self.evidence, found, strict=True)]

    def stopped_early(self, agent: Outcome) -> bool:
        """Whether the episode made a successful call of a stop tool the task's script does not make."""
        return any(call.ok and call.name in self.stray_stops for call in agent.calls)

    def reached(self, said: Sequence[str], agent: Callable[[], Outcome], require_outputs: bool = True) -> bool:
        """The completion rule: every check of :meth:`checks` passes. ``agent`` gives the episode's outcome, asked for
        only when the outputs were said (it may hash the database)."""
        if (require_outputs or self.evidence) and not all(communicated_texts(said, self.outputs)):
            return False
        return all(passed for _, passed in self.checks(said, agent(), require_outputs))

    def checks(self, said: Sequence[str], agent: Outcome, require_outputs: bool = True) -> list[tuple[str, bool]]:
        """Each check of the completion rule, named, with whether the episode passed it: every expected output said
        (unless not ``require_outputs``, MUA-RL's rule, which presumes a write: a task whose gold changes nothing
        always needs them), the final state the gold's, no stop tool called that the script does not call, and every
        evidence item shown. The task is complete when all pass."""
        out = []
        if require_outputs or self.evidence:
            outputs = communicated_texts(said, self.outputs)
            out += [(f"said {text!r}", ok) for text, ok in zip(self.outputs, outputs, strict=True)]
        out.append(("the final database equals the gold state", agent.state_hash == self.state_hash))
        if self.stray_stops:
            out.append((f"no call of {', '.join(sorted(self.stray_stops))}", not self.stopped_early(agent)))
        shown = self.shown(said, agent)
        out += [(_evidence_name(item), ok) for item, ok in zip(self.evidence, shown, strict=True)]
        return out


def _evidence_name(item: Evidence) -> str:
    value = item.value if item.kind == "output" else item.value.get("name") if isinstance(item.value, Mapping) else ""
    return {
        "output": f"said {value!r}",
        "call": f"called {value}",
        "declined": f"proposed {value} and the user declined it",
        "refused": f"did not call {value}",
    }.get(item.kind, f"{item.kind} {value}")


def _shown(item: Evidence, said: Sequence[str], agent: Outcome) -> bool:
    if item.kind == "output":
        return communicated_texts(said, [item.value])[0]
    if item.kind == "declined":
        return any(matches(item.value, call, held=True) for call in agent.declined)
    if item.kind == "refused":  # not attempted at all, whatever the harness would answer (a gate refuses it anyway)
        return not any(matches(item.value, call, held=True) for call in agent.calls)
    return any(matches(item.value, call) for call in agent.calls)


def task_goal(domain: str, task: Mapping[str, Any]) -> Goal:
    """``task``'s :class:`Goal` in ``domain`` (from the cached gold outcome; a checked task)."""
    stops = get_domain(domain).stop_tools
    items = () if gold_changes_state(domain, task) else tuple(evidence(task, stops))
    stray = frozenset() if any(a["name"] in stops for a in scripted_actions(task)) else frozenset(stops)
    return Goal(gold_outcome(domain, task).state_hash, tuple(expected_outputs(task)), items, stray)
