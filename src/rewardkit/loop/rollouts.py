"""A batch of multi-turn episodes summed up from their ``rollout_infos``: how they ended and what their tools did.

The live diagnostics write one such summary per GRPO step (``rollouts.jsonl`` in the run's output folder), and
``rewardkit audit`` reads it back: turn counts, endings, calls and errors per tool, the episodes excluded as
infrastructure, and the policy's tokens. Where a simulator erred on purpose (``user_sim.fault_rate``), its labels
too: the mistakes made, how many of those episodes stayed in the advantages, and how many of those the run's first
reward scored 0 (``scores``): the wrongly zero-scored episodes that the user review is there to keep out.

>>> infos = [{"termination": "user_stop", "turns": 3, "policy_tokens": 120,
...           "audit": [{"tool": "get_order", "code": "OK", "side": "agent"}]},
...          {"termination": "user_sim_error", "turns": 1, "policy_tokens": 40, "audit": []}]
>>> s = summarize_rollouts(infos)
>>> s["terminations"], s["excluded"], s["tools"], s["policy_tokens"]
({'user_stop': 1, 'user_sim_error': 1}, 1, {'get_order': {'calls': 1, 'errors': 0}}, {'mean': 80.0, 'max': 120})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rewardkit.envs.approvals import agent_rows
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.tool import ResultCode

FILE = "rollouts.jsonl"  # one summary per GRPO step, beside ms-swift's logging.jsonl and completions.jsonl


def summarize_rollouts(infos: Sequence[Any], scores: Sequence[float | None] | None = None) -> dict[str, Any]:
    """Counts over the episodes whose ``rollout_infos`` came from the ``simulated_user`` scheduler; ``scores``: the
    run's first reward of each, in the same order."""
    records = [EpisodeRecord.read(i) for i in infos]
    scored = [
        (r, score)
        for r, score in zip(records, [None] * len(records) if scores is None else scores, strict=True)
        if r is not None and r.termination is not None
    ]
    episodes = [r for r, _ in scored]
    tools: dict[str, dict[str, int]] = {}
    for record in episodes:
        for row in agent_rows(record.audit or ()):  # the agent's calls, not the user's decisions
            counts = tools.setdefault(str(row.get("tool")), {"calls": 0, "errors": 0})
            counts["calls"] += 1
            counts["errors"] += row.get("code") != ResultCode.OK.value
    tokens = [r.policy_tokens for r in episodes]
    summary = {
        "episodes": len(episodes),
        "terminations": dict(Counter(str(r.termination) for r in episodes)),
        "excluded": sum(r.excluded for r in episodes),
        "turns": [r.turns for r in episodes],
        "tools": dict(sorted(tools.items())),
        "tool_errors": sum(r.tool_errors for r in episodes),
        # the episodes the user review flagged (excluded as user_sim_mistake, or counted), by the kind of mistake
        "user_flagged": sum(bool(r.user_flags) for r in episodes),
        "user_flags": dict(Counter(str(f.get("kind")) for r in episodes for f in r.user_flags)),
        "policy_tokens": {"mean": sum(tokens) / len(tokens) if tokens else None, "max": max(tokens, default=None)},
    }
    faulty = [(r, score) for r, score in scored if r.user_sim_fault]
    if faulty:
        trained = [score for r, score in faulty if not r.excluded]
        summary["user_sim_faults"] = {
            "made": dict(Counter(str(r.user_sim_fault) for r, _ in faulty)),
            "trained": len(trained),  # in the advantages: the review missed them (or was not asked to exclude)
            "trained_zero": None if scores is None else sum(score == 0 for score in trained),
        }
    return summary
