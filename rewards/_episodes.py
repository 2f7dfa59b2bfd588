"""What the task-completion rewards share: reading tau2 rows and the outcome of the agent's episode.

An episode's outcome is the final state hash plus every call with its result. It comes from the rollout's own
record when the environment left one in ``rollout_infos`` (keys ``state_hash`` and ``audit``), else from replaying
the agent's tool calls on a fresh database copy. Whether the task can be scored and what completes it is its verdict's
(:mod:`rewardkit.envs.task_verdict`, judged once per process).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rewardkit.envs import get_domain
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.outcomes import Outcome, recorded_outcome, replay_conversation
from rewardkit.envs.task_verdict import checked_task
from rewardkit.envs.tasks import TaskError
from rewardkit.rewards._base import Reward
from rewardkit.rewards._parsing import DatasetError, where

TAU2_FORMAT = (
    "Rows need 'messages' (the conversation, ending with the rollout), 'task' (the tau2 task object, "
    "or its JSON) and 'domain' (e.g. 'retail'); `rewardkit build tau2-grpo` writes such rows"
)


def row_task(task: Any, domain: Any, row: int) -> Mapping[str, Any]:
    """The row's task, playable in its domain (judged once per distinct task per process, with the scheduler's)."""
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


def agent_outcome(
    domain: str,
    messages: Sequence[Mapping[str, Any]],
    record: EpisodeRecord | None,
    need_calls: bool,
    task: Mapping[str, Any],
) -> Outcome:
    """The episode's outcome: the state hash and audit the live environment recorded, where it did; a replay of the
    messages for what it did not (with ``need_calls``, the calls of a record without its audit)."""
    state = record.state_hash if record is not None else None
    if state is None:
        return replay_conversation(domain, messages, task=task)
    if record is not None and record.audit is not None:
        return recorded_outcome(state, list(record.audit))
    if not need_calls:
        return Outcome(state, ())
    return replace(replay_conversation(domain, messages, task=task), state_hash=state)


def write_tools(domain: str) -> frozenset[str]:
    return get_domain(domain).write_tools


class EpisodeReward(Reward):
    """Base of the rewards that judge a whole tool-use episode against a tau2 task."""

    columns = ("messages", "task", "domain")
    optional_columns = ("rollout_infos",)
    dataset_format = TAU2_FORMAT

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        infos = [EpisodeRecord.read(i) for i in columns.get("rollout_infos") or [None] * len(completions)]
        # Every row's task and domain first: a dataset bug fails the first batch, whatever the model did.
        rows = [(row_task(t, d, i), d) for i, (t, d) in enumerate(zip(columns["task"], columns["domain"], strict=True))]
        out: list[float | None] = []
        for i, (cell, (task, domain), info) in enumerate(zip(columns["messages"], rows, infos, strict=True)):
            messages = read_messages(cell, i)
            if info is not None and info.excluded:  # the simulator failed: not the policy's doing, left out of training
                out.append(None)
            elif info is not None and info.termination is not None and not info.natural:  # tau2: no credit
                out.append(0.0)
            else:
                out.append(self.score_episode(messages, task, domain, info))
        return out

    def score_episode(
        self, messages: Sequence[Mapping[str, Any]], task: Mapping[str, Any], domain: str, infos: EpisodeRecord | None
    ) -> float:
        raise NotImplementedError
