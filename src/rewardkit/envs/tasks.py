"""tau2 tasks: the one reader and validator every consumer uses (builder, rewards, scheduler, simulators).

A task is tau2-bench's JSON object. What rewardkit reads of it:

- ``evaluation_criteria.actions``: the gold tool calls, each ``{"name", "arguments", "compare_args"?}``;
  every name must be one of the domain's tools (an unknown one fails on replay, and doing nothing
  would then match the gold);
- ``evaluation_criteria.communicate_info`` and ``nl_assertions``: lists of strings;
- ``user_scenario.instructions``: tau2's structured mapping (``reason_for_call``, ``known_info``, ...)
  or free text, which the user simulators act out.

:func:`task_problem` says what is wrong with a task as ``(reason, detail)``; the builder counts the
reason, and :func:`read_task` raises :class:`TaskError` with the detail and where the task came from.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from rewardkit.files.jsonl import kind


class TaskError(ValueError):
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
        if tools is not None and action["name"] not in tools:
            known = ", ".join(sorted(tools))
            return f"{at}: tool {action['name']!r} does not exist in domain {domain!r} (tools: {known})"
    for key in ("communicate_info", "nl_assertions"):
        value = criteria.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            fix = "; wrap the string in a list (it would be read as its characters)" if isinstance(value, str) else ""
            return f"evaluation_criteria.{key}: must be a list of strings, got {kind(value)}{fix}"
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
    return None  # a missing or non-text reason_for_call is the builder's no_reason_for_call


def task_problem(task: Any, tools: Collection[str] | None = None, domain: str | None = None) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``task`` cannot be judged or acted out, else None.

    Reasons: ``bad_task`` (not an object), ``no_evaluation_criteria``, ``bad_evaluation_criteria``,
    ``bad_user_scenario``. With ``tools``, every gold action must name one of them.
    """
    if not isinstance(task, Mapping):
        return "bad_task", f"a task must be an object, got {kind(task)}"
    if not task.get("evaluation_criteria"):
        return "no_evaluation_criteria", "the task has no evaluation_criteria to score a rollout against"
    problem = _criteria_problem(task["evaluation_criteria"], tools, domain)
    if problem:
        return "bad_evaluation_criteria", problem
    problem = _scenario_problem(task)
    return ("bad_user_scenario", problem) if problem else None


def read_task(
    cell: Any, at: str = "task", tools: Collection[str] | None = None, domain: str | None = None
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
        raise TaskError(f"{at}: {found[1]}; fix the task in the dataset (`rewardkit build tau2-grpo` checks tasks)")
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


def gold_actions(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(task["evaluation_criteria"].get("actions") or [])


def expected_outputs(task: Mapping[str, Any]) -> list[str]:
    return [str(x) for x in task["evaluation_criteria"].get("communicate_info") or []]
