"""TaskCompletionRate: partial credit on a tau2 task, a weight-0 metric beside TaskCompletion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from rewardkit.envs.outcomes import Call, gold_outcome
from rewardkit.envs.tasks import expected_outputs, gold_actions
from rewardkit.rewards._episodes import EpisodeReward, agent_outcome, communicated, write_tools


def _matches(action: Mapping[str, Any], call: Call) -> bool:
    """tau2's comparison: same tool, equal arguments (only ``compare_args`` when the task lists them)."""
    if call.name != action["name"] or not call.ok:
        return False
    keys = action.get("compare_args")
    gold = action.get("arguments") or {}
    if keys is None:
        return dict(call.arguments) == dict(gold)
    return {k: call.arguments.get(k) for k in keys} == {k: gold.get(k) for k in keys}


class TaskCompletionRate(EpisodeReward):
    """MUA-RL's task completion rate (TCR): satisfied criteria / all criteria.

    Formula: ``(W_matched + O_said + S) / (W + O + 1)`` where

    - W: the task's gold write actions that succeed when the gold actions are
      replayed; W_matched: those matched one-to-one by a successful agent call
      with equal arguments (``compare_args`` respected, ``idempotency_key``
      ignored);
    - O: the expected outputs (``communicate_info``); O_said: those said, as in
      TaskCompletion;
    - S: 1 if the final state hash equals the gold one, else 0.

    Calls and hash come from ``rollout_infos`` (``audit`` and ``state_hash``)
    when the live environment left both, else from a replay.
    Columns: ``messages``, ``task``, ``domain``; optional ``rollout_infos``.
    A live episode that did not end by a stop scores 0.0, one whose simulator
    failed scores None, as in TaskCompletion.
    Range: [0, 1]; 1.0 implies TaskCompletion = 1. Meant with weight 0, as a
    logged metric.

    Example (one gold write, one expected output, so the denominator is 1 + 1 + 1)::

        >>> from rewardkit.rewards import TaskCompletionRate
        >>> cancel = {"order_id": "#W6779827", "reason": "no longer needed"}
        >>> task = {"evaluation_criteria": {
        ...     "actions": [{"name": "cancel_pending_order", "arguments": cancel}], "communicate_info": ["refund"]}}
        >>> call = {"role": "assistant", "content": '<tool_call>{"name": "cancel_pending_order", "arguments": '
        ...     '{"order_id": "#W6779827", "reason": "no longer needed"}}</tool_call>'}
        >>> told = {"role": "assistant", "content": "Cancelled; the refund is on its way."}
        >>> silent = {"role": "assistant", "content": "Cancelled."}
        >>> rows = {"messages": [[call, told], [call, silent], [told]], "task": [task] * 3, "domain": ["retail"] * 3}
        >>> [round(r, 3) for r in TaskCompletionRate()(["", "", ""], **rows)]  # 3/3; (1 + 0 + 1)/3; (0 + 1 + 0)/3
        [1.0, 0.667, 0.333]
    """

    order = 110
    sets = MappingProxyType({"agent": 0.0, "agent_multi_turn": 0.0})

    def score_episode(
        self, messages: Sequence[Mapping[str, Any]], task: Mapping[str, Any], domain: str, infos: Any
    ) -> float:
        writes = write_tools(domain)
        gold = gold_outcome(domain, task)
        # A gold write that fails on replay (tau2 keeps a few) is not something the task requires.
        gold_writes = [a for a, c in zip(gold_actions(task), gold.calls, strict=True) if a["name"] in writes and c.ok]
        said = communicated(messages, expected_outputs(task), infos)
        agent = agent_outcome(domain, messages, infos, need_calls=True, task=task)
        unused = list(agent.calls)
        matched = 0
        for action in gold_writes:
            hit = next((c for c in unused if _matches(action, c)), None)
            if hit is not None:
                unused.remove(hit)
                matched += 1
        state = agent.state_hash == gold.state_hash
        return (matched + sum(said) + state) / (len(gold_writes) + len(said) + 1)
