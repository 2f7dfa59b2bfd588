"""What the task-completion rewards share: reading tau2 rows and the outcome of the agent's episode.

An episode's outcome is the final state hash plus every call with its result. It comes from the rollout's own
record when the environment left one in ``rollout_infos`` (keys ``state_hash`` and ``audit``), else from replaying
the agent's tool calls on a fresh database copy. What completes the task (its :class:`~rewardkit.envs.outcomes.Goal`)
comes with a live record too (``goal``: the scheduler judged the task; read for the row's own task, by its digest);
any other row's task is judged here, by its verdict (:mod:`rewardkit.envs.task_verdict`, once per process).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rewardkit.envs import get_domain
from rewardkit.envs.episode_record import EpisodeRecord, said_texts
from rewardkit.envs.outcomes import Goal, Outcome, recorded_outcome, replay_conversation
from rewardkit.envs.task_verdict import checked_task, task_goal
from rewardkit.envs.tasks import TaskError, read_task, task_digest
from rewardkit.files.cache import SMALL_BUDGET, ByteLRU
from rewardkit.rewards._base import Reward
from rewardkit.rewards._parsing import DatasetError, where

TAU2_FORMAT = (
    "Rows need 'messages' (the conversation, ending with the rollout), 'task' (the tau2 task object, "
    "or its JSON) and 'domain' (e.g. 'retail'); `rewardkit build tau2-grpo` writes such rows"
)


def row_domain(domain: Any, row: int) -> str:
    """The row's domain, known to the registry, else a TaskError naming the cell."""
    if not isinstance(domain, str):
        raise TaskError(
            f"{where('domain', row)}: must name a domain: 'retail', an installed domain or a domain folder's path; "
            f"got {domain!r:.80}"
        )
    try:
        get_domain(domain)
    except ValueError as exc:
        raise TaskError(f"{where('domain', row)}: {exc}") from exc
    return domain


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


@dataclass(frozen=True)
class EpisodeRow:
    """One row as the episode rewards read it: the conversation, its task, its live record (None offline) and what
    completes the task."""

    messages: Sequence[Mapping[str, Any]]
    task: Mapping[str, Any]
    domain: str
    record: EpisodeRecord | None
    goal: Goal

    def said(self) -> list[str]:
        """What the agent said to the user, message by message (the record's, where it kept it)."""
        return said_texts(self.messages, self.record)

    def outcome(self, need_calls: bool) -> Outcome:
        """The episode's outcome: the state hash and audit the live environment recorded, where it did; a replay of
        the messages for what it did not (with ``need_calls``, the calls of a record without its audit)."""
        record = self.record
        state = record.state_hash if record is not None else None
        if state is None:
            return replay_conversation(self.domain, self.messages, task=self.task)
        if record is not None and record.audit is not None:
            return recorded_outcome(state, list(record.audit))
        if not need_calls:
            return Outcome(state, ())
        return replace(replay_conversation(self.domain, self.messages, task=self.task), state_hash=state)


def live_goal(record: EpisodeRecord | None, digest: str) -> Goal | None:
    """The goal a live episode's record carries for the task of ``digest`` (:func:`~rewardkit.envs.tasks.task_digest`),
    beside its final state and calls; else None: the task is judged here."""
    if record is None or record.goal is None or record.state_hash is None or record.audit is None:
        return None
    return record.goal if record.goal.task == digest else None


# (domain, a task cell's JSON text) -> the task, its shape checked, and its digest: every row of every step asks, to
# read its live record's goal, so once per distinct task per process, as the verdicts are.
SHAPES = ByteLRU(SMALL_BUDGET, maxsize=4096)


def row_task(cell: Any, domain: Any, record: EpisodeRecord | None, row: int) -> tuple[Mapping[str, Any], Goal | None]:
    """The row's task, its shape checked, and the goal its live record brings for it; without one, the task judged
    (once per distinct task per process, with the scheduler's). A dataset bug raises TaskError naming the cell."""
    at, known = where("task", row), row_domain(domain, row)
    if record is not None and record.goal is not None:

        def shaped() -> tuple[Mapping[str, Any], str]:
            task = read_task(cell, at, get_domain(known).tools, known)
            return task, task_digest(task)

        task, digest = SHAPES.get((known, cell) if isinstance(cell, str) else None, shaped)
        goal = live_goal(record, digest)
        if goal is not None:
            return task, goal
    return checked_task(cell, at, known), None


def episode_row(
    messages: Sequence[Mapping[str, Any]],
    task: Mapping[str, Any],
    domain: str,
    record: EpisodeRecord | None,
    goal: Goal | None = None,
) -> EpisodeRow:
    """The row of a checked ``task``: ``goal`` (its live record's), else the task's verdict's."""
    return EpisodeRow(messages, task, domain, record, goal or task_goal(domain, task))


class EpisodeReward(Reward):
    """Base of the rewards that judge a whole tool-use episode against a tau2 task."""

    columns = ("messages", "task", "domain")
    optional_columns = ("rollout_infos",)
    dataset_format = TAU2_FORMAT

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        infos = [EpisodeRecord.read(i) for i in columns.get("rollout_infos") or [None] * len(completions)]
        # Every row's task first: a dataset bug fails the first batch, whatever the model did.
        cells = zip(columns["task"], columns["domain"], infos, strict=True)
        tasks = [row_task(cell, domain, info, i) for i, (cell, domain, info) in enumerate(cells)]
        out: list[float | None] = []
        rows = zip(columns["messages"], tasks, columns["domain"], infos, strict=True)
        for i, (cell, (task, goal), domain, info) in enumerate(rows):
            messages = read_messages(cell, i)
            if info is not None and info.excluded:  # the simulator failed: not the policy's doing, left out of training
                out.append(None)
            elif info is not None and info.termination is not None and not info.natural:  # tau2: no credit
                out.append(0.0)
            else:
                out.append(self.score_episode(episode_row(messages, task, domain, info, goal)))
        return out

    def score_episode(self, episode: EpisodeRow) -> float:
        raise NotImplementedError
