"""TaskCompletionRate: partial credit on a tau2 task, a weight-0 metric beside TaskCompletion."""

from __future__ import annotations

from types import MappingProxyType

from rewardkit.envs.outcomes import matches
from rewardkit.envs.tasks import communicated_texts
from rewardkit.rewards._episodes import EpisodeReward, EpisodeRow


class TaskCompletionRate(EpisodeReward):
    """MUA-RL's task completion rate (TCR): satisfied criteria / all criteria.

    Formula: ``(W_matched + O_said + S) / (W + O + 1)`` where

    - W: the task's gold write actions that succeed when the gold actions are
      replayed; W_matched: those matched one-to-one by a successful agent call
      with equal arguments (``compare_args`` respected, ``idempotency_key``
      ignored);
    - O: the expected outputs (``communicate_info``); O_said: those said, as in
      TaskCompletion;
    - S: 1 if the final state hash equals the gold one and no stop tool (a transfer)
      was called that the gold does not call, else 0.

    On a task whose gold leaves the state as it was, S is no criterion (doing
    nothing earns it): the formula is ``S * (W_matched + O_said + E_shown) / (W + O + E)``,
    E being the evidence items besides the outputs (the transfers and ``compare_args``
    calls, the declined and the refused writes; :func:`rewardkit.envs.tasks.evidence`)
    and E_shown those the episode showed, as TaskCompletion judges them; a changed
    state there is a write the task did not want, and scores 0.

    Calls and hash come from ``rollout_infos`` (``audit`` and ``state_hash``)
    when the live environment left both, else from a replay.
    Columns: ``messages``, ``task``, ``domain``; optional ``rollout_infos``.
    A live episode that did not end by a stop scores 0.0, one whose simulator
    failed scores None, as in TaskCompletion.
    Range: [0, 1]; 1.0 implies TaskCompletion = 1. Meant with weight 0, as a
    logged metric. A task TaskCompletion refuses (``no_evidence``) raises here too.

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

    A transfer that must also say a figure: no write, one output, one evidence call (E = 1)::

        >>> transfer = {"name": "transfer_to_human_agents", "arguments": {"summary": "refund"}, "compare_args": []}
        >>> handover = {"evaluation_criteria": {"actions": [transfer], "communicate_info": ["refund"]}}
        >>> hand = {"role": "assistant", "content": '<tool_call>{"name": "transfer_to_human_agents", '
        ...     '"arguments": {"summary": "the user wants a refund"}}</tool_call>'}
        >>> rows = {"messages": [[told, hand], [told]], "task": [handover] * 2, "domain": ["retail"] * 2}
        >>> TaskCompletionRate()(["", ""], **rows)  # (0 + 1 + 1)/(0 + 1 + 1); (0 + 1 + 0)/2
        [1.0, 0.5]
    """

    order = 110
    sets = MappingProxyType({"agent": 0.0, "agent_multi_turn": 0.0})

    def score_episode(self, episode: EpisodeRow) -> float:
        goal, texts = episode.goal, episode.said()
        said = communicated_texts(texts, goal.outputs)
        agent = episode.outcome(need_calls=True)
        unused = list(agent.calls)
        matched = 0
        for action in goal.writes:  # a gold write that fails on replay (tau2 keeps a few) is not one the task requires
            hit = next((c for c in unused if matches(action, c)), None)
            if hit is not None:
                unused.remove(hit)
                matched += 1
        state = agent.state_hash == goal.state_hash and not goal.stopped_early(agent)
        if not goal.evidence:
            return (matched + sum(said) + state) / (len(goal.writes) + len(said) + 1)
        shown = [ok for item, ok in zip(goal.evidence, goal.shown(texts, agent), strict=True) if item.kind != "output"]
        return state * (matched + sum(said) + sum(shown)) / (len(goal.writes) + len(said) + len(shown))
