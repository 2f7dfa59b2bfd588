"""The gold a lint compares every probe with: the row's ``completion``, or one formed from the row.

- A row with a ``completion`` column: that is the gold (a string). For a tool-use reward set the gold trajectory is
  the row's ``messages``, which must then hold the agent's turns, and ``completion`` becomes the content of its
  last assistant message, as for a tau2 row.
- A planning row without one (``rewardkit build planning-grpo`` output: ``messages``, ``solution``, ``experts``):
  the gold is ``<think>`` + a short think written from the solution + ``</think>`` + ``<answer>`` + the solution's
  JSON + ``</answer>``.
- A tau2 row without agent turns (``rewardkit build tau2-grpo`` output: ``messages``, ``task``, ``domain``): the gold
  trajectory is what :class:`~rewardkit.loop.gold.GoldAgent` writes after the prompt: one Hermes tool call per
  scripted action it sends (all but the refused ones), then one message with its refusals and every expected
  output, then its closing line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.tasks import TaskError, read_task
from rewardkit.errors import UserError
from rewardkit.files.jsonl import kind
from rewardkit.loop.gold import GoldAgent
from rewardkit.rewards.answers import AnswerSchema

COMPLETION = "completion"
FROM_SOLUTION = "solution"
FROM_GOLD_ACTIONS = "gold actions"


class NoGoldError(UserError, ValueError):
    """A row has no gold and none can be formed (a usage error: exit 2)."""


def planning_think(answer: Mapping[str, Any], schema: AnswerSchema) -> str:
    """A plain think for a gold answer: the rewritten question, the number of steps and who takes them."""
    rewrite = str(answer.get(schema.rewrite_key, "")).strip()
    steps = answer.get(schema.plan_key) or []
    experts = list(dict.fromkeys(str(s.get(schema.expert_key, "")) for s in steps if isinstance(s, Mapping)))
    return (
        f"用户的问题可以理解为“{rewrite}”，先确认需要哪些专家，再安排顺序。"
        f"这需要{len(steps)}步，由{'、'.join(experts)}依次处理，每一步都交给最合适的专家。"
    )


def planning_gold(solution: str, schema: AnswerSchema) -> str:
    """The gold completion of a planning row: the solution, with a think, in the strict format."""
    answer = json.loads(solution)
    think = planning_think(answer, schema)
    return f"<think>\n{think}\n</think>\n\n<answer>\n{json.dumps(answer, ensure_ascii=False)}\n</answer>"


def _has_agent_turn(messages: Any) -> bool:
    return isinstance(messages, list) and any(isinstance(m, Mapping) and m.get("role") == "assistant" for m in messages)


def _last_said(messages: Sequence[Any]) -> str:
    """A trajectory's ``completion``: the content of its last assistant message ("" when that is not text)."""
    said = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant"]
    content = said[-1].get("content") if said else None
    return content if isinstance(content, str) else ""


def _prompt_problem(messages: Any) -> str | None:
    """What keeps a tau2 row's ``messages`` from being a prompt (a list of {role, content} objects), else None."""
    if not isinstance(messages, list):
        return f"must be a list of {{role, content}} messages, got {kind(messages)}"
    for j, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"message {j + 1} is {kind(message)}, not a {{role, content}} object"
        for name in ("role", "content"):
            if name not in message:
                return f"message {j + 1} has no '{name}'"
            if not isinstance(message[name], str):
                return f"message {j + 1}: '{name}' must be a string, got {kind(message[name])}"
    return None


def tau2_gold(row: Mapping[str, Any], at: str) -> list[dict[str, Any]]:
    """The row's prompt followed by the gold agent's turns (the task's gold calls, then what it must say). The
    row's ``messages`` and ``task`` are checked first (the task by :func:`~rewardkit.envs.tasks.read_task`);
    :class:`NoGoldError` names ``at`` (the file and row) and the column."""
    problem = _prompt_problem(row.get("messages"))
    if problem is not None:
        raise NoGoldError(f"{at}: column 'messages': {problem}")
    if "task" not in row:
        raise NoGoldError(f"{at}: no column 'task'; a tau2 row has 'messages', 'task' and 'domain', as other rows do")
    try:
        task = read_task(row["task"], f"{at}: column 'task'")
    except TaskError as exc:
        raise NoGoldError(str(exc)) from exc
    agent = GoldAgent(task)
    messages = [dict(m) for m in row["messages"]]
    for _ in range(len(agent.actions) + 2):
        messages.append({"role": "assistant", "content": agent(messages)})
    return messages


def _tool_use_gold(rows: Sequence[Mapping[str, Any]], where: str) -> tuple[list[dict[str, Any]], str]:
    """:func:`with_gold` for a tool-use reward set: the rows' own trajectories, or tau2 rows played by the gold
    agent (when a row has a ``task``, every row must be a tau2 row)."""
    if all(_has_agent_turn(r.get("messages")) for r in rows):
        return [{**r, COMPLETION: _last_said(r["messages"])} for r in rows], COMPLETION
    if not any("task" in r for r in rows):
        raise NoGoldError(
            f"{where}: a tool-use reward set needs rows whose 'messages' hold the gold trajectory, or tau2 rows "
            "('messages', 'task', 'domain') to play the task's gold actions on"
        )
    out = []
    for i, r in enumerate(rows):
        if _has_agent_turn(r.get("messages")):
            raise NoGoldError(f"{where}: row {i + 1} holds agent turns and others do not; use one kind of row")
        messages = tau2_gold(r, f"{where}: row {i + 1}")
        out.append({**r, "messages": messages, COMPLETION: _last_said(messages)})
    return out, FROM_GOLD_ACTIONS


def with_gold(
    rows: Sequence[Mapping[str, Any]], *, tool_use: bool, schema: AnswerSchema, where: str
) -> tuple[list[dict[str, Any]], str]:
    """The rows, each with its gold, and where the gold came from (:data:`COMPLETION`, :data:`FROM_SOLUTION` or
    :data:`FROM_GOLD_ACTIONS`). Every row must take its gold the same way."""
    if tool_use:
        return _tool_use_gold(rows, where)
    if all(COMPLETION in r for r in rows):
        return [dict(r) for r in rows], COMPLETION
    if all(isinstance(r.get("solution"), str) for r in rows):
        out = []
        for i, r in enumerate(rows):
            try:
                out.append({**r, COMPLETION: planning_gold(r["solution"], schema)})
            except (ValueError, AttributeError, TypeError) as exc:
                raise NoGoldError(f"{where}: row {i + 1}: 'solution' is not a gold answer's JSON ({exc})") from exc
        return out, FROM_SOLUTION
    missing = next(i for i, r in enumerate(rows) if COMPLETION not in r)
    raise NoGoldError(
        f"{where}: row {missing + 1} has no 'completion' (the gold completion) and no 'solution' to form one from"
    )
