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
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.approvals import agent_rows
from rewardkit.envs.termination import EXCLUDED
from rewardkit.envs.tool import ResultCode

FILE = "rollouts.jsonl"  # one summary per GRPO step, beside ms-swift's logging.jsonl and completions.jsonl


def summarize_rollouts(infos: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Counts over the episodes whose ``rollout_infos`` came from the ``simulated_user`` scheduler."""
    episodes = [i for i in infos if isinstance(i, Mapping) and "termination" in i]
    tools: dict[str, dict[str, int]] = {}
    for info in episodes:
        for row in agent_rows(info.get("audit") or []):  # the agent's calls, not the user's decisions
            counts = tools.setdefault(str(row.get("tool")), {"calls": 0, "errors": 0})
            counts["calls"] += 1
            counts["errors"] += row.get("code") != ResultCode.OK.value
    tokens = [int(i.get("policy_tokens") or 0) for i in episodes]
    return {
        "episodes": len(episodes),
        "terminations": dict(Counter(str(i["termination"]) for i in episodes)),
        "excluded": sum(str(i["termination"]) in EXCLUDED for i in episodes),  # str-valued members match
        "turns": [int(i.get("turns") or 0) for i in episodes],
        "tools": dict(sorted(tools.items())),
        "tool_errors": sum(int(i.get("tool_errors") or 0) for i in episodes),
        "policy_tokens": {"mean": sum(tokens) / len(tokens) if tokens else None, "max": max(tokens, default=None)},
    }
