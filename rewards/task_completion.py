"""TaskCompletion: 1 iff the agent really completed the tau2 task (MUA-RL's binary reward)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from rewardkit.config import config_section, setting
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.tasks import task_digest
from rewardkit.rewards._episodes import EpisodeReward, EpisodeRow, episode_row, live_goal, read_messages, row_task
from rewardkit.rewards.config import RewardConfig, load_section


@config_section("task_completion")
@dataclass(frozen=True)
class TaskCompletionConfig:
    """Which rule decides that a tau2 task is complete."""

    require_outputs: bool = setting(
        True,
        "true: tau2-bench's rule (the final database is right and every expected output was said); "
        "false: MUA-RL's (the final database alone; a task whose gold changes nothing still needs its outputs).",
    )


class TaskCompletion(EpisodeReward):
    """Binary task completion on a real database.

    Formula: ``1.0 if state(agent) == state(gold) and every expected output was said, else 0.0``
    (tau2-bench's rule). With ``task_completion.require_outputs: false`` in
    ``$REWARDKIT_CONFIG`` it is MUA-RL's: ``1.0 iff state(agent) == state(gold)``
    (:class:`TaskCompletionConfig`, above). A task whose gold leaves the state as it was
    (a transfer, a refusal, a read) is one that doing nothing would reach: there, every
    evidence item must be shown too, and the outputs are required under either rule
    (:meth:`rewardkit.envs.outcomes.Goal.reached`, the one rule the scripted user's stop shares).

    - state: the canonical hash (sha256 of the exported db.json-shaped state,
      sorted keys, nulls dropped) after replaying the agent's tool calls on a
      fresh database copy, against the hash after the task's gold actions on
      another. Calls that fail validation or preconditions change nothing, as
      live. If ``rollout_infos["state_hash"]`` is present (the live
      environment's), it is used instead of replaying.
    - said: every ``evaluation_criteria.communicate_info`` string appears in one
      assistant message, case-insensitive, commas removed (``rollout_infos["agent_said"]``
      when a live episode left it).
    - evidence (a gold that changes nothing, :func:`rewardkit.envs.tasks.evidence`): each gold
      call of a stop tool (a transfer) or with ``compare_args`` made successfully (tau2's
      comparison); each ``"outcome": "declined"`` entry proposed, held for approval
      (APPROVAL_REQUIRED) and declined by the user; each ``"outcome": "refused"`` entry never
      attempted (no matching call, whatever its result), counted only beside the rest shown.
      Read from ``rollout_infos["audit"]`` when present, else from the replay.
    - stop: a successful call of a stop tool (a transfer) on a task whose gold makes none scores 0.0.
    - ending: a live episode (``rollout_infos["termination"]``) must have ended by a
      stop of the user's or the agent's (tau2): ``max_turns``, ``token_budget``,
      ``error_budget`` and ``length`` score 0.0; ``user_sim_error`` scores None.

    Columns: ``messages`` (tool calls in Hermes ``<tool_call>`` blocks, OpenAI
    ``tool_calls`` or ms-swift ``tool_call`` messages), ``task`` (tau2 task
    object or JSON), ``domain``; optional ``rollout_infos``.
    Range: {0.0, 1.0}. None only for an episode whose user simulator failed, which
    the ``simulated_user`` scheduler leaves out of training. A malformed ``task`` cell or
    unknown domain raises (dataset bug), and so does a task whose gold changes nothing and
    names no evidence (``no_evidence``: doing nothing would complete it); any model output scores.

    Example (the first call builds the retail database once per process)::

        >>> from rewardkit.rewards import TaskCompletion
        >>> cancel = {"order_id": "#W6779827", "reason": "no longer needed"}
        >>> task = {"evaluation_criteria": {
        ...     "actions": [{"name": "cancel_pending_order", "arguments": cancel}], "communicate_info": ["refund"]}}
        >>> call = {"role": "assistant", "content": '<tool_call>{"name": "cancel_pending_order", "arguments": '
        ...     '{"order_id": "#W6779827", "reason": "no longer needed"}}</tool_call>'}
        >>> told = {"role": "assistant", "content": "Cancelled; the refund is on its way."}
        >>> silent = {"role": "assistant", "content": "Cancelled."}
        >>> rows = {"messages": [[call, told], [call, silent], [told]], "task": [task] * 3, "domain": ["retail"] * 3}
        >>> TaskCompletion()(["", "", ""], **rows)  # right state and said; right state only; said only
        [1.0, 0.0, 0.0]
        >>> TaskCompletion(config={"task_completion": {"require_outputs": False}})(["", "", ""], **rows)  # MUA-RL's
        [1.0, 1.0, 0.0]

    A transfer task: its gold changes nothing, so only the episode that transfers completes it::

        >>> transfer = {"name": "transfer_to_human_agents", "arguments": {"summary": "refund"}, "compare_args": []}
        >>> handover = {"evaluation_criteria": {"actions": [transfer]}}
        >>> hand = {"role": "assistant", "content": '<tool_call>{"name": "transfer_to_human_agents", '
        ...     '"arguments": {"summary": "the user wants a refund"}}</tool_call>'}
        >>> bye = {"role": "assistant", "content": "Goodbye."}
        >>> TaskCompletion()(["", ""], messages=[[hand], [bye]], task=[handover] * 2, domain=["retail"] * 2)
        [1.0, 0.0]
    """

    section = TaskCompletionConfig
    order = 100
    sets = MappingProxyType({"agent": 1.0, "agent_multi_turn": 1.0})

    def __init__(self, args: Any = None, config: RewardConfig | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.cfg = load_section(TaskCompletionConfig, config)
        self.require_outputs = self.cfg.require_outputs

    def score_episode(self, episode: EpisodeRow) -> float:
        goal = episode.goal
        # The calls are read only where the goal judges them (evidence, a stray transfer), else the hash alone.
        return float(goal.reached(episode.said(), partial(episode.outcome, goal.needs_calls), self.require_outputs))

    def checks(
        self, messages: Sequence[Mapping[str, Any]], task: Mapping[str, Any], domain: str, record: EpisodeRecord | None
    ) -> list[tuple[str, bool]]:
        """This reward's checks of one episode of a checked ``task``, named, each passed or not (``Goal.checks``): it
        scores 1.0 when all pass and the episode ended by a stop. What the episode log and the viewer show beside
        the score."""
        episode = episode_row(messages, task, domain, record, live_goal(record, task_digest(task)))
        goal = episode.goal
        return goal.checks(episode.said(), episode.outcome(goal.needs_calls), self.require_outputs)

    def row_checks(self, messages: Any, task: Any, domain: Any, rollout_infos: Any = None) -> list[tuple[str, bool]]:
        """:meth:`checks` of one row as the reward receives it: its ``messages``, ``task`` and ``domain`` cells (a
        task as JSON or not) and its ``rollout_infos``, the live episode's record (the goal it brings is read for
        the row's own task). What the live diagnostics send to the trackers beside the score."""
        record = EpisodeRecord.read(rollout_infos)
        checked, _ = row_task(task, domain, record, 0)
        return self.checks(read_messages(messages, 0), checked, domain, record)
