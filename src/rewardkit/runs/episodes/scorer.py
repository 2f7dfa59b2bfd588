"""The scorer: the training rewards applied to one finished episode, giving its episode-log record.

The same rewards GRPO trains with (``TaskCompletion``, ``TaskCompletionRate``); an episode that ended
on an infrastructure error is recorded ``infra_error`` and left unscored. Beside the score it records why: the
reward's checks, each passed or not, and the final database against the gold's, field by field (:meth:`Scorer.explain`,
what the viewer shows without replaying anything). The record's fields are listed in
:mod:`rewardkit.runs.episodes.episode_log`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs import get_domain
from rewardkit.envs.approvals import agent_rows, gate_counts
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.outcomes import replay_conversation
from rewardkit.envs.simulated import by_rule
from rewardkit.envs.state_diff import Changes, state_diff
from rewardkit.envs.task_verdict import gold_outcome, task_goal
from rewardkit.loop.drive import EpisodeResult
from rewardkit.rewards import TaskCompletion, TaskCompletionRate


class Scorer:
    """The training rewards, applied to one finished episode."""

    def __init__(self, domain: str, require_outputs: bool) -> None:
        self.domain = domain
        self.completion = TaskCompletion(config={"task_completion": {"require_outputs": require_outputs}})
        self.rate = TaskCompletionRate()

    def record(self, result: EpisodeResult, task: Mapping[str, Any], trial: int, run: str) -> dict[str, Any]:
        infos = result.infos
        excluded = infos.excluded
        agent_calls = agent_rows(infos.audit or ())  # not the user's approvals
        columns = {"messages": [result.messages], "task": [task], "domain": [self.domain], "rollout_infos": [infos]}
        reward = None if excluded else self.completion([""], **columns)[0]
        tcr = None if excluded else self.rate([""], **columns)[0]
        tcr = tcr if tcr is None or math.isfinite(tcr) else None  # an undefined rate is null, never NaN
        checks, diff = (None, None) if excluded else self.explain(result.messages, task, infos, result.changes)
        return {
            "run": run,
            "task_id": result.task_id,
            "trial": trial,
            "status": "infra_error" if excluded else "ok",
            "reward": reward,
            "tcr": tcr,
            "termination": infos.termination,
            "turns": infos.turns,
            "tool_calls": infos.tool_calls,
            "tool_errors": infos.tool_errors,
            "tools": dict(Counter(str(a["tool"]) for a in agent_calls)),
            "call_codes": dict(Counter(str(a["code"]) for a in agent_calls)),
            "gates": gate_counts(infos.audit or ()),
            "error": infos.error,
            "state_hash": infos.state_hash,
            "user_flags": [dict(flag) for flag in infos.user_flags],  # the user review's (rollout.user_review: count)
            "checks": checks,
            "diff": diff,
            "messages": result.messages,
            "closing": result.closing,  # the user's line that ended the episode, which the policy never saw
        }

    def explain(
        self,
        messages: Sequence[Mapping[str, Any]],
        task: Mapping[str, Any],
        infos: EpisodeRecord | None,
        changes: Changes | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """Why an episode scored what it did: the reward's checks (``{"check", "passed"}`` each) and where its final
        database differs from the gold's (:func:`~rewardkit.envs.state_diff.state_diff`; empty at the gold state).
        The checks read the episode's own record; the diff, what its writes changed (``changes``, the live
        environment's tracking) against what the gold's change, replayed once per task. Without ``changes`` the
        episode's calls are replayed on a fresh copy, where a replay gives what the episode saw: not on simulated
        tools answered by a model (the diff is then None, not compared)."""
        named = self.completion.checks(messages, task, self.domain, infos)
        checks = [{"check": name, "passed": ok} for name, ok in named]
        hash_ = infos.state_hash if infos is not None else None
        if hash_ is not None and hash_ == task_goal(self.domain, task).state_hash:
            return checks, []
        if changes is None:
            simulation = get_domain(self.domain).simulation
            if simulation is not None and simulation.answer is not by_rule:
                return checks, None
            changes = replay_conversation(self.domain, messages, changes=True, task=task).changes
            assert changes is not None  # asked for
        gold = gold_outcome(self.domain, task).changes
        assert gold is not None  # the verdict's replay keeps them
        return checks, state_diff(changes, gold)
