"""A batch of multi-turn episodes summed up from their ``rollout_infos``: how they ended and what their tools did.

The live diagnostics write one such summary per GRPO step (``rollouts.jsonl`` in the run's output folder), and
``rewardkit audit`` reads it back: turn counts, endings, calls and errors per tool, the episodes excluded as
infrastructure, and the policy's tokens.

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


def summarize_rollouts(infos: Sequence[Any]) -> dict[str, Any]:
    """Counts over the episodes whose ``rollout_infos`` came from the ``simulated_user`` scheduler."""
    records = (EpisodeRecord.read(i) for i in infos)
    episodes = [r for r in records if r is not None and r.termination is not None]
    tools: dict[str, dict[str, int]] = {}
    for record in episodes:
        for row in agent_rows(record.audit or ()):  # the agent's calls, not the user's decisions
            counts = tools.setdefault(str(row.get("tool")), {"calls": 0, "errors": 0})
            counts["calls"] += 1
            counts["errors"] += row.get("code") != ResultCode.OK.value
    tokens = [r.policy_tokens for r in episodes]
    return {
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
