"""What the task-completion rewards share: reading tau2 rows and replaying trajectories.

An episode's outcome is the final state hash plus every call with its result.
It comes from the rollout's own record when the environment left one in
``rollout_infos`` (keys ``state_hash`` and ``audit``), else from replaying the
agent's tool calls on a fresh database copy. Gold outcomes are cached per
process: a task's gold actions replay once, however many rollouts it has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.envs import get_domain, make_env
from rewardkit.envs.harness import IDEMPOTENCY_KEY, ResultCode
from rewardkit.envs.tasks import (
    TaskError,
    error_text,
    gold_actions,
    gold_problem,
    read_task,
    task_error,
    task_problem,
)
from rewardkit.envs.termination import EXCLUDED, NATURAL
from rewardkit.envs.tool_calls import tool_calls, user_facing_texts
from rewardkit.rewards._base import Reward
from rewardkit.rewards._cache import SMALL_BUDGET, ByteLRU
from rewardkit.rewards._parsing import DatasetError, where
from rewardkit.rewards._rows import RowCache, cells_key

TAU2_FORMAT = (
    "Rows need 'messages' (the conversation, ending with the rollout), 'task' (the tau2 task object, "
    "or its JSON) and 'domain' (e.g. 'retail'); `rewardkit build tau2-grpo` writes such rows"
)


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


EPISODE_ROWS = RowCache()  # (task, domain) cells -> the checked task


def task_check(task: Mapping[str, Any], domain: str) -> tuple[str, str] | None:
    """``(reason, detail)`` of what is wrong with ``task`` in ``domain``, else None: the shared task checks with the
    domain's tool schemas, then the gold replay (a failed gold write is ``gold_fails``). The replay is the cached
    gold outcome, so each task replays once per process. For a run that selects tasks and counts bad ones."""
    found = get_domain(domain)
    problem = task_problem(task, found.tools, domain)
    if problem is None:
        replayed = [(c.ok, c.error) for c in gold_outcome(domain, task).calls]
        problem = gold_problem(task, replayed, found.write_tools)
    return problem


def checked_task(cell: Any, at: str, domain: str) -> Mapping[str, Any]:
    """The task in ``cell`` (an object or its JSON), checked by :func:`task_check`; a TaskError names ``at``."""
    task = read_task(cell, at, get_domain(domain).tools, domain)
    problem = task_check(task, domain)
    if problem is not None:
        raise task_error(at, problem)
    return task


def _check_row(task: Any, domain: Any, row: int) -> Mapping[str, Any]:
    if not isinstance(domain, str):
        raise TaskError(
            f"{where('domain', row)}: must name a domain: 'retail', an installed domain or a domain folder's path; "
            f"got {domain!r:.80}"
        )
    try:
        get_domain(domain)
    except ValueError as exc:
        raise TaskError(f"{where('domain', row)}: {exc}") from exc
    return checked_task(task, where("task", row), domain)


def row_task(task: Any, domain: Any, row: int) -> Mapping[str, Any]:
    """The row's task, checked with its domain once per distinct (task, domain) pair."""
    return EPISODE_ROWS.get(cells_key(task, domain), lambda: _check_row(task, domain, row))


def read_messages(cell: Any, row: int) -> list[Any]:
    """A ``messages`` cell (list or its JSON). What is inside is the model's and is read leniently; a cell
    that is not a list at all is a dataset or pipeline bug."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except (ValueError, RecursionError) as exc:
            raise DatasetError(f"{where('messages', row)}: holds a string that is not JSON: {cell[:80]!r}") from exc
    if not isinstance(cell, (list, tuple)):
        raise DatasetError(f"{where('messages', row)}: must be a list of chat messages; got {cell!r:.80}")
    return list(cell)


def _normalise(text: str) -> str:
    return text.lower().replace(",", "")


def communicated_texts(texts: Sequence[str], outputs: Sequence[str]) -> list[bool]:
    """Per expected output: does one of ``texts`` contain it (case-insensitive, commas removed)?"""
    normalised = [_normalise(t) for t in texts]
    return [any(_normalise(out) in t for t in normalised) for out in outputs]


def communicated(messages: Sequence[Mapping[str, Any]], outputs: Sequence[str], infos: Any = None) -> list[bool]:
    """Per expected output: did one assistant message say it? A live rollout's ``agent_said`` is used
    when present (on ms-swift >= 4.6 ``messages`` may hold assistant turns as token ids)."""
    said = infos.get("agent_said") if isinstance(infos, Mapping) else None
    texts = said if isinstance(said, list) else user_facing_texts(messages)
    return communicated_texts([t for t in texts if isinstance(t, str)], outputs)


def termination(infos: Any) -> str | None:
    """How a live episode ended (``rollout_infos["termination"]``), or None for offline data."""
    value = infos.get("termination") if isinstance(infos, Mapping) else None
    return value if isinstance(value, str) else None


def _strip_key(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if k != IDEMPOTENCY_KEY}


def replay(domain: str, calls: Sequence[Any]) -> Outcome:
    """Run ``calls`` (ToolCalls or {"name", "arguments"} mappings) on a fresh copy of ``domain``'s database."""
    with make_env(domain) as env:
        results = env.replay(calls)
        audit = env.audit()
        return Outcome(
            env.state_hash(),
            tuple(
                Call(a["tool"], _strip_key(a["arguments"]), r.ok, None if r.ok else error_text(r))
                for a, r in zip(audit, results, strict=True)
            ),
        )


# (domain, gold actions as JSON) -> Outcome. It grows with the distinct tasks in the data, so it is bounded twice:
# 4096 tasks (tau2 retail has 114) and a quarter of $REWARDKIT_CACHE_MB in bytes. An entry is a task's gold calls
# and their arguments, typically a few KB, so the count is what binds; the bytes guard against unusual data.
GOLD_OUTCOMES = ByteLRU(SMALL_BUDGET, maxsize=4096)


def _gold(domain: str, actions_json: str) -> Outcome:
    return GOLD_OUTCOMES.get((domain, actions_json), lambda: replay(domain, json.loads(actions_json)))


def gold_outcome(domain: str, task: Mapping[str, Any]) -> Outcome:
    return _gold(domain, json.dumps(gold_actions(task), sort_keys=True))


def _recorded(infos: Any, need_calls: bool) -> Outcome | None:
    """The outcome the live environment recorded in ``rollout_infos``, if it did."""
    if not isinstance(infos, Mapping) or not isinstance(infos.get("state_hash"), str):
        return None
    if not need_calls:
        return Outcome(infos["state_hash"], ())
    audit = infos.get("audit")
    if not isinstance(audit, list):
        return None
    calls = tuple(
        Call(str(a.get("tool")), _strip_key(a.get("arguments") or {}), a.get("code") == ResultCode.OK.value)
        for a in audit
    )
    return Outcome(infos["state_hash"], calls)


def agent_outcome(domain: str, messages: Sequence[Mapping[str, Any]], infos: Any, need_calls: bool) -> Outcome:
    return _recorded(infos, need_calls) or replay(domain, tool_calls(messages))


def write_tools(domain: str) -> frozenset[str]:
    return get_domain(domain).write_tools


class EpisodeReward(Reward):
    """Base of the rewards that judge a whole tool-use episode against a tau2 task."""

    columns = ("messages", "task", "domain")
    optional_columns = ("rollout_infos",)
    dataset_format = TAU2_FORMAT

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        infos = columns.get("rollout_infos") or [None] * len(completions)
        # Every row's task and domain first: a dataset bug fails the first batch, whatever the model did.
        rows = [(row_task(t, d, i), d) for i, (t, d) in enumerate(zip(columns["task"], columns["domain"], strict=True))]
        out: list[float | None] = []
        for i, (cell, (task, domain), info) in enumerate(zip(columns["messages"], rows, infos, strict=True)):
            messages = read_messages(cell, i)
            ended = termination(info)
            if ended in EXCLUDED:  # the simulator failed: not the policy's doing, left out of training
                out.append(None)
            elif ended is not None and ended not in NATURAL:  # tau2: no credit without a proper ending
                out.append(0.0)
            else:
                out.append(self.score_episode(messages, task, domain, info))
        return out

    def score_episode(
        self, messages: Sequence[Mapping[str, Any]], task: Mapping[str, Any], domain: str, infos: Any
    ) -> float:
        raise NotImplementedError
