"""What a sequence of tool calls leaves behind on a fresh database, and the rule that says an episode did its task.

An :class:`Outcome` is the final state hash plus every call with its result: :func:`replay` makes one from calls,
:func:`replay_conversation` from an episode's messages (each user decision in its place), :func:`recorded_outcome`
from a live environment's own record. A task's gold outcome is its verdict's (:mod:`rewardkit.envs.task_verdict`,
judged once per process).

:class:`Goal` is the one completion rule: the task-completion rewards, the episode's progress (the scripted user's
stop) and the multi-turn scheduler all judge an episode by :meth:`Goal.reached`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.envs import Domain, get_domain
from rewardkit.envs.approvals import agent_rows, decided_rows, gate_counts, user_decision
from rewardkit.envs.harness import StatefulEnvironment
from rewardkit.envs.state_diff import Changes, units
from rewardkit.envs.tasks import OUTCOMES, Evidence, communicated_texts, error_text
from rewardkit.envs.tool import IDEMPOTENCY_KEY, ResultCode
from rewardkit.envs.tool_calls import tool_calls


@dataclass(frozen=True)
class Call:
    name: str
    arguments: Mapping[str, Any]  # without the idempotency key
    ok: bool
    error: str | None = field(default=None, compare=False)  # "CODE: message" of a failed replayed call
    text: str = field(default="", compare=False)  # the result's text, when the replay kept it


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
    domain: str | Domain,
    calls: Sequence[Any],
    approve: bool = False,
    changes: bool = False,
    task: Mapping[str, Any] | None = None,
    fresh: bool = False,
    texts: bool = False,
) -> Outcome:
    """Run ``calls`` (ToolCalls or {"name", "arguments"} mappings) on a fresh copy of ``domain``'s database (``task``'s
    memory, on a simulated domain); with ``approve``, each call held for approval is approved as its user would and
    sent again (``harness.replay``); with ``changes``, the outcome keeps what differs from the fresh state
    (:mod:`rewardkit.envs.state_diff`); with ``fresh``, the state hash before the calls; with ``texts``, each
    result's text."""
    found = get_domain(domain) if isinstance(domain, str) else domain
    with found.env_for(task) as env:
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
        calls_made = tuple(_call(a, r, texts) for a, r in pairs)
        return Outcome(env.state_hash(), calls_made, approved, changed, fresh_hash=before)


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


def _call(row: Mapping[str, Any], result: Any, text: bool = False) -> Call:
    """One call as outcomes compare it: its audit row's tool and arguments (key dropped), and its result (with
    ``text``, the result's text too)."""
    error = None if result.ok else error_text(result)
    return Call(row["tool"], without_key(row["arguments"]), result.ok, error, result.text() if text else "")


def _decision(message: Any) -> str | None:
    """The user-side tool a user message asks for, or None (any other message, the agent's included)."""
    if not isinstance(message, Mapping) or message.get("role") != "user" or not isinstance(message.get("content"), str):
        return None
    return user_decision(message["content"])


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
    writes: tuple[Mapping[str, Any], ...] = ()  # the gold writes that succeed on a fresh database (partial credit)
    task: str = ""  # the task's digest (tasks.task_digest): a recorded goal is read only for the row's own task

    def to_json(self) -> dict[str, Any]:
        """The goal as an episode record carries it (``rollout_infos["goal"]``), for the reward to read back."""
        return {
            "task": self.task,
            "state_hash": self.state_hash,
            "outputs": list(self.outputs),
            "evidence": [{"kind": item.kind, "value": item.value} for item in self.evidence],
            "stray_stops": sorted(self.stray_stops),
            "writes": [dict(action) for action in self.writes],
        }

    @classmethod
    def read(cls, value: Any) -> Goal | None:
        """A recorded goal (:meth:`to_json`), or None for a cell that holds none, or one off that shape or that no
        task's verdict gives (nothing to write or show, an evidence output not among the outputs): the reward then
        judges the row's task itself."""
        if not isinstance(value, Mapping) or not all(isinstance(value.get(k), str) for k in ("task", "state_hash")):
            return None
        outputs, evidence, stops, writes = (value.get(k) for k in ("outputs", "evidence", "stray_stops", "writes"))
        if not (_all(outputs, str) and _all(stops, str) and _all(writes, _action) and _all(evidence, _evidence)):
            return None
        items = tuple(Evidence(item["kind"], item["value"]) for item in evidence)
        if not (writes or any(i.kind != "refused" for i in items)) or any(
            i.kind == "output" and i.value not in outputs for i in items
        ):
            return None
        return cls(value["state_hash"], tuple(outputs), items, frozenset(stops), tuple(writes), value["task"])

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


def _all(value: Any, fits: Any) -> bool:
    """Whether ``value`` is a list whose every item fits (``fits``: a type, or a predicate)."""
    check = (lambda item: isinstance(item, fits)) if isinstance(fits, type) else fits
    return isinstance(value, list) and all(check(item) for item in value)


def _action(value: Any) -> bool:
    """Whether ``value`` is a gold action :func:`matches` reads: a name, an arguments object, compare_args named."""
    keys = value.get("compare_args") if isinstance(value, Mapping) else None
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("arguments", {}), Mapping)
        and (keys is None or _all(keys, str))
    )


def _evidence(value: Any) -> bool:
    if not isinstance(value, Mapping) or set(value) != {"kind", "value"}:
        return False
    if value["kind"] == "output":
        return isinstance(value["value"], str)
    return value["kind"] in ("call", *OUTCOMES) and _action(value["value"])


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
