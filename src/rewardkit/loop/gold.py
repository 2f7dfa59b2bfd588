"""An agent that knows the answer: it follows a task's gold actions, then says the expected outputs.

It is the deterministic check of the whole loop (every task must score 1.0 through it)
and a source of bootstrap trajectories. It reads only the conversation it is given, like
any policy, plus the task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.tasks import expected_outputs, gold_actions

DONE = "Everything you asked for is done. Is there anything else I can help you with?"


def hermes_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One tool call in Qwen/Hermes form, as a Qwen3 policy writes it."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


class GoldAgent:
    """One gold action per turn; then one message with every expected output; then a closing line."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.actions = gold_actions(task)
        self.outputs = expected_outputs(task)
        self.step = 0

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        step, self.step = self.step, self.step + 1
        if step < len(self.actions):
            action = self.actions[step]
            return hermes_call(action["name"], action.get("arguments") or {})
        if step == len(self.actions) and self.outputs:
            return "Here is what I found: " + "; ".join(self.outputs) + ". " + DONE
        return DONE
