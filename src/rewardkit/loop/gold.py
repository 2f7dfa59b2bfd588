"""An agent that knows the answer: it follows a task's gold actions, then says the expected outputs.

It is the deterministic check of the whole loop (every task must score 1.0 through it)
and a source of bootstrap trajectories. It reads only the conversation it is given, like
any policy, plus the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.tasks import expected_outputs, gold_actions

# The agent's lines, in the language the user writes in.
LINES = {
    "en": {"found": "Here is what I found: {outputs}. ", "done": "Everything you asked for is done. Is there "
           "anything else I can help you with?", "ask": "This needs your approval first: {request}. Do you approve?"},
    "zh": {"found": "查询结果：{outputs}。", "done": "您交代的都已办好，还有什么需要吗？",
           "ask": "这一步需要您先批准：{request}。您同意吗？"},
}  # fmt: skip
_CJK = re.compile(r"[\u4e00-\u9fff]")


def hermes_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One tool call in Qwen/Hermes form, as a Qwen3 policy writes it."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def _approval_request(message: Mapping[str, Any]) -> str | None:
    """The harness's request text when ``message`` is a tool result refusing a call until the user approves."""
    if message.get("role") != "tool" or not isinstance(message.get("content"), str):
        return None
    try:
        error = json.loads(message["content"]).get("error")
    except (ValueError, AttributeError):
        return None
    if isinstance(error, Mapping) and error.get("code") == "APPROVAL_REQUIRED":
        return f"{error.get('request_id')}: {error.get('message')}"
    return None


class GoldAgent:
    """One gold action per turn; then one message with every expected output; then a closing line.

    A gold write the harness holds for approval is put to the user (in the user's language), and sent again on
    the next turn: the user approved it (the task's gold holds only writes its user approves)."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.actions = gold_actions(task)
        self.outputs = expected_outputs(task)
        self.step = 0

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        lines = LINES["zh" if any(isinstance(u, str) and _CJK.search(u) for u in users) else "en"]
        request = _approval_request(messages[-1]) if messages else None
        if request is not None:
            self.step -= 1  # the held write goes again once the user has answered
            return lines["ask"].format(request=request)
        step, self.step = self.step, self.step + 1
        if step < len(self.actions):
            action = self.actions[step]
            return hermes_call(action["name"], action.get("arguments") or {})
        if step == len(self.actions) and self.outputs:
            return lines["found"].format(outputs="; ".join(self.outputs)) + lines["done"]
        return lines["done"]
