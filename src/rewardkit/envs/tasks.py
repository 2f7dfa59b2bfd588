"""tau2 tasks: the one reader and validator every consumer uses (builder, rewards, scheduler, simulators).

A task is tau2-bench's JSON object. What rewardkit reads of it:

- ``evaluation_criteria.actions``: the gold tool calls, each ``{"name", "arguments", "compare_args"?}``;
  every name must be one of the domain's tools (an unknown one fails on replay, and doing nothing
  would then match the gold), and, given the domain's tool specs, every action's arguments must fit
  the tool's JSON Schema (``bad_gold_arguments``). rewardkit adds ``outcome`` to an action: ``"declined"``
  (a soft-gated write the agent proposes and its user declines: the user's ``approval`` must be ``"decline"``)
  or ``"refused"`` (a write the agent must not make; ``rule``, optional, names why). Such an entry must be one
  of the domain's writes; it stays in the list, in order, for the gold agent (:func:`scripted_actions`), and is
  left out of :func:`gold_actions`, the calls that make the gold state;
- ``evaluation_criteria.communicate_info`` and ``nl_assertions``: lists of strings;
- ``user_scenario.instructions``: tau2's structured mapping (``reason_for_call``, ``known_info``, ...)
  or free text, which the user simulators act out; rewardkit adds ``approval`` (``"approve"`` or
  ``"decline"``): how the user answers the agent's requests for approval of a soft-gated write.

:func:`task_problem` says what is wrong with a task's shape as ``(reason, detail)``, and :func:`read_task` raises
:class:`TaskError` with the detail and where the task came from. Whether a well-shaped task can judge an episode
(its gold replayed on a fresh database) is :mod:`rewardkit.envs.task_verdict`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs.tool import canonical
from rewardkit.errors import UserError
from rewardkit.files.jsonl import kind

APPROVAL_ANSWERS = ("approve", "decline")  # user_scenario.instructions.approval: how the user answers requests
OUTCOMES = ("declined", "refused")  # an action's ``outcome``: a write its user declines, or one the agent refuses


class TaskError(UserError, ValueError):
    """A task is not usable as a tau2 task (a dataset bug, not a model error)."""


def _criteria_problem(criteria: Any, tools: Collection[str] | None, domain: str | None) -> str | None:
    if not isinstance(criteria, Mapping):
        return f"evaluation_criteria: must be an object, got {kind(criteria)}"
    actions = criteria.get("actions")
    if actions is not None and not isinstance(actions, list):
        return f"evaluation_criteria.actions: must be a list of action objects, got {kind(actions)}"
    for i, action in enumerate(actions or []):
        at = f"evaluation_criteria.actions[{i}]"
        if not isinstance(action, Mapping) or not isinstance(action.get("name"), str):
            got = kind(action) if not isinstance(action, Mapping) else f"name {kind(action.get('name'))}"
            return f"{at}: must be an object with a string 'name', got {got}"
        if action.get("arguments") is not None and not isinstance(action["arguments"], Mapping):
            return f"{at}: 'arguments' must be an object, got {kind(action['arguments'])}"
        keys = action.get("compare_args")
        if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            return f"{at}: 'compare_args' must be a list of argument names or null, got {kind(keys)}"
        problem = _outcome_shape(action)
        if problem:
            return f"{at}: {problem}"
        if tools is not None and action["name"] not in tools:
            known = ", ".join(sorted(tools))
            return f"{at}: tool {action['name']!r} does not exist in domain {domain!r} (tools: {known})"
        problem = _compare_args_problem(action, tools.get(action["name"]) if isinstance(tools, Mapping) else None)
        if problem:
            return f"{at}: {problem}"
    for key in ("communicate_info", "nl_assertions"):
        value = criteria.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            fix = "; wrap the string in a list (it would be read as its characters)" if isinstance(value, str) else ""
            return f"evaluation_criteria.{key}: must be a list of strings, got {kind(value)}{fix}"
    return None


def _compare_args_problem(action: Mapping[str, Any], spec: Any) -> str | None:
    """A ``compare_args`` name that is no parameter of the tool (given its spec): it is None on every call and in the
    gold alike, so the entry would match any call of the tool."""
    parameters = getattr(spec, "parameters", None)
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    bad = next((k for k in action.get("compare_args") or [] if k not in properties), None)
    if bad is None:
        return None
    known = ", ".join(sorted(properties))
    return (
        f"compare_args names {bad!r}, which {action['name']!r} does not take (its parameters: {known}); fix the "
        "name (an unknown one matches any call of the tool)"
    )


def _outcome_shape(action: Mapping[str, Any]) -> str | None:
    """What is wrong with an action's ``outcome`` and ``rule`` keys on their own, else None."""
    if "outcome" in action and action["outcome"] not in OUTCOMES:
        return f"'outcome' must be 'declined' or 'refused', got {action['outcome']!r}"
    rule = action.get("rule")
    if rule is not None and not isinstance(rule, str):
        return f"'rule' must be a string, got {kind(rule)}"
    if "rule" in action and action.get("outcome") != "refused":
        return "'rule' belongs to a refused entry (the rule its refusal names): drop it, or mark the entry refused"
    return None


def _outcome_problem(task: Mapping[str, Any], tools: Collection[str] | Mapping[str, Any] | None) -> str | None:
    """The first declined or refused entry that is no write of the domain (given its specs), or that is declined
    while the user approves (the write would run, and the gold state would lack it)."""
    for i, action in enumerate(scripted_actions(task)):
        outcome, at = action.get("outcome"), f"evaluation_criteria.actions[{i}]"
        spec = tools.get(action["name"]) if isinstance(tools, Mapping) and outcome else None
        if getattr(spec, "risk", "write") != "write":
            return f"{at}: a {outcome} entry must be a write, but {action['name']!r} only reads; drop its 'outcome'"
        if outcome == "declined" and approves(task):
            return (
                f"{at}: a declined entry needs a user who declines, but user_scenario.instructions.approval is "
                "'approve'; set it to 'decline', or drop the 'outcome' (an approved write is a plain gold action)"
            )
    return None


def _scenario_problem(task: Mapping[str, Any]) -> str | None:
    scenario = task.get("user_scenario")
    if scenario is not None and not isinstance(scenario, Mapping):
        return f"user_scenario: must be an object, got {kind(scenario)}"
    found = (scenario or {}).get("instructions")
    if found is not None and not isinstance(found, Mapping | str):
        return f"user_scenario.instructions: must be an object or a string, got {kind(found)}"
    info = found.get("known_info") if isinstance(found, Mapping) else None
    if info is not None and not isinstance(info, str):
        return f"user_scenario.instructions.known_info: must be a string, got {kind(info)}"
    answer = found.get("approval") if isinstance(found, Mapping) else None
    if answer is not None and answer not in APPROVAL_ANSWERS:
        return f"user_scenario.instructions.approval: must be 'approve' or 'decline', got {answer!r}"
    return None  # a missing or non-text reason_for_call is the builder's no_reason_for_call


def _arguments_problem(criteria: Mapping[str, Any], tools: Mapping[str, Any]) -> str | None:
    """The first gold action whose arguments the tool's schema refuses (the harness would answer
    SCHEMA_VIOLATION and run nothing), given specs with a ``violation(arguments)`` check."""
    for i, action in enumerate(criteria.get("actions") or []):
        check = getattr(tools.get(action["name"]), "violation", None)
        problem = check(dict(action.get("arguments") or {})) if check is not None else None
        if problem:
            return (
                f"evaluation_criteria.actions[{i}]: the arguments of {action['name']!r} do not fit its schema "
                f"({problem}), so the gold call would run nothing"
            )
    return None


def task_problem(
    task: Any, tools: Collection[str] | Mapping[str, Any] | None = None, domain: str | None = None
) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``task`` cannot be judged or acted out, else None.

    Reasons: ``bad_task`` (not an object), ``no_evaluation_criteria``, ``bad_evaluation_criteria``,
    ``bad_gold_arguments``, ``bad_user_scenario``. With ``tools``, every gold action must name one of
    them; when ``tools`` maps names to specs (``Domain.tools``), its arguments must fit the tool's schema, and a
    declined or refused entry must name a write.
    """
    if not isinstance(task, Mapping):
        return "bad_task", f"a task must be an object, got {kind(task)}"
    if not task.get("evaluation_criteria"):
        return "no_evaluation_criteria", "the task has no evaluation_criteria to score a rollout against"
    problem = _criteria_problem(task["evaluation_criteria"], tools, domain)
    if problem:
        return "bad_evaluation_criteria", problem
    problem = _arguments_problem(task["evaluation_criteria"], tools) if isinstance(tools, Mapping) else None
    if problem:
        return "bad_gold_arguments", problem
    problem = _outcome_problem(task, tools)
    if problem:
        return "bad_evaluation_criteria", problem
    problem = _scenario_problem(task)
    return ("bad_user_scenario", problem) if problem else None


def error_text(result: Any) -> str:
    """``CODE: message`` of a failed harness result (what a replayed call that failed records)."""
    value = getattr(result, "value", None)
    error = value.get("error") if isinstance(value, Mapping) else None
    message = error.get("message") if isinstance(error, Mapping) else result.text()
    return f"{result.code.value}: {message}"


def task_error(at: str, found: tuple[str, str]) -> TaskError:
    """The :class:`TaskError` for a problem of the task at ``at``."""
    return TaskError(f"{at}: {found[1]}; fix the task in the dataset (`rewardkit build tau2-grpo` checks tasks)")


def read_task(
    cell: Any, at: str = "task", tools: Collection[str] | Mapping[str, Any] | None = None, domain: str | None = None
) -> Mapping[str, Any]:
    """A task object, or its JSON text, checked by :func:`task_problem`; :class:`TaskError` names ``at``."""
    task = cell
    if isinstance(cell, str):
        try:
            task = json.loads(cell)
        except (ValueError, RecursionError) as exc:
            raise TaskError(f"{at}: holds a string that is not JSON: {cell[:80]!r}") from exc
    found = task_problem(task, tools, domain)
    if found is not None:
        raise task_error(at, found)
    return task


def instructions(task: Mapping[str, Any]) -> Mapping[str, Any] | str | None:
    """``user_scenario.instructions``: tau2's mapping, or free text; None when the task has none."""
    scenario = task.get("user_scenario")
    found = scenario.get("instructions") if isinstance(scenario, Mapping) else None
    return found if isinstance(found, Mapping | str) else None


def reason_for_call(task: Mapping[str, Any]) -> str | None:
    """What the customer wants: the mapping's ``reason_for_call``, or the free-text instructions."""
    found = instructions(task)
    reason = found.get("reason_for_call") if isinstance(found, Mapping) else found
    return reason if isinstance(reason, str) else None


def known_info(task: Mapping[str, Any]) -> str | None:
    """What the customer may tell about themselves (structured instructions only)."""
    found = instructions(task)
    info = found.get("known_info") if isinstance(found, Mapping) else None
    return info if isinstance(info, str) else None


def held_out(task_id: Any, share: float = 0.2) -> bool:
    """Whether a task no split lists is a ``test`` task: by the hash of its id, so adding tasks never moves one (a
    fifth held out)."""
    digest = hashlib.sha256(str(task_id).encode("utf-8", "surrogatepass")).hexdigest()  # an id is hashed as text
    return int(digest[:8], 16) / 16**8 < share


def placed(splits: Mapping[str, Sequence[Any]], task_ids: Iterable[Any]) -> dict[str, list[Any]]:
    """``splits`` (split name -> task ids), with each task they list nowhere added to ``test`` when
    :func:`held_out`, else to ``train``, and to ``base`` when there is one (tau2's whole set): a task added to a
    domain needs no split file."""
    out: dict[str, list[Any]] = {"train": [], "test": [], **{name: list(ids) for name, ids in splits.items()}}
    listed = {task_id for ids in splits.values() for task_id in ids}
    for task_id in task_ids:
        if task_id not in listed:
            out["test" if held_out(task_id) else "train"].append(task_id)
            out.get("base", []).append(task_id)
    return out


def task_digest(task: Mapping[str, Any]) -> str:
    """The sha256 of ``task``'s canonical JSON: how two processes (a trainer and its environment server) know they
    hold the same task under one id."""
    return hashlib.sha256(canonical(task).encode("ascii")).hexdigest()


def approves(task: Mapping[str, Any]) -> bool:
    """Whether the user approves the agent's approval requests (``instructions.approval``; absent: declines)."""
    found = instructions(task)
    return isinstance(found, Mapping) and found.get("approval") == "approve"


def scripted_actions(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every entry of ``evaluation_criteria.actions``, in order, declined and refused writes included: what the gold
    agent plays."""
    return list(task["evaluation_criteria"].get("actions") or [])


def gold_entries(task: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """``(index in evaluation_criteria.actions, action)`` of each entry without an ``outcome``."""
    return [(i, a) for i, a in enumerate(scripted_actions(task)) if "outcome" not in a]


def gold_actions(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The calls that make the gold state: the entries without an ``outcome`` (a declined or refused write changes
    nothing)."""
    return [a for _, a in gold_entries(task)]


def expected_outputs(task: Mapping[str, Any]) -> list[str]:
    return [str(x) for x in task["evaluation_criteria"].get("communicate_info") or []]


def _normalise(text: str) -> str:
    return text.lower().replace(",", "")


def communicated_texts(texts: Sequence[str], outputs: Sequence[str]) -> list[bool]:
    """Per expected output: does one of ``texts`` contain it (case-insensitive, commas removed; tau2's check)?"""
    normalised = [_normalise(t) for t in texts]
    return [any(_normalise(out) in t for t in normalised) for out in outputs]


@dataclass(frozen=True)
class Evidence:
    """One thing an episode must show on a task whose gold leaves the database as it was (:func:`evidence`).

    ``kind``: ``output`` (``value`` is the text to say), ``call`` (``value`` is the gold action a successful call
    must match), ``declined`` (the gold entry the agent must propose and the user decline) or ``refused`` (the gold
    entry the agent must not make)."""

    kind: str
    value: Any


NO_EVIDENCE = (
    "the gold leaves the database as it was and names no output, transfer or declined write: doing nothing reaches "
    "it; add the expected output (communicate_info), the transfer or the declined write the agent must show"
)


def evidence(task: Mapping[str, Any], stop_tools: Collection[str]) -> list[Evidence]:
    """What an episode must show when ``task``'s gold changes nothing (its state is then the fresh one, reached by
    doing nothing): every expected output, said; every gold action that ends the conversation (one of the domain's
    ``stop_tools``: a transfer to a human) or names its ``compare_args``, matched by a successful call; every
    ``declined`` entry, proposed by the agent, held for approval and declined by the user; every ``refused`` entry,
    not made. A refused entry alone is no evidence (doing nothing does not make it either), nor is an output that is
    blank once case and commas are dropped (every text says it): with nothing else the list is empty, as it is for a
    task that names none of these (its verdict's ``no_evidence``, :mod:`rewardkit.envs.task_verdict`)."""
    items = [Evidence("output", text) for text in expected_outputs(task)]
    for action in scripted_actions(task):
        outcome = action.get("outcome")
        if outcome is not None:
            items.append(Evidence(str(outcome), action))
        elif action["name"] in stop_tools or action.get("compare_args") is not None:
            items.append(Evidence("call", action))
    shows = [i for i in items if i.kind != "refused" and (i.kind != "output" or _normalise(i.value).strip())]
    return items if shows else []
