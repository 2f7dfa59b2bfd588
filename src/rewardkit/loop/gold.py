"""An agent that knows the answer: it follows a task's script (its gold actions, and the writes its user declines
or it must refuse), then says the expected outputs.

It is the deterministic check of the whole loop (every task must score 1.0 through it)
and a source of bootstrap trajectories. It reads only the conversation it is given, like
any policy, plus the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.approvals import user_decision
from rewardkit.envs.tasks import expected_outputs, scripted_actions
from rewardkit.envs.tool import IDEMPOTENCY_KEY

# The agent's lines, in the language the user writes in.
LINES = {
    "en": {
        "found": "Here is what I found: {outputs}. ",
        "done": "Everything you asked for is done. Is there anything else I can help you with?",
        "more": "Is there anything else I can help you with?",
        "ask": "This needs your approval first: {request}. Do you approve?",
        "declined": "Understood, I have not done it: {request}",
        "refuse": "I can't do that: {call}{rule}. ",
        "rule": " ({rule})",
    },
    "zh": {
        "found": "查询结果：{outputs}。",
        "done": "您交代的都已办好，还有什么需要吗？",
        "more": "还有什么需要吗？",
        "ask": "这一步需要您先批准：{request}。您同意吗？",
        "declined": "好的，这一步不执行：{request}",
        "refuse": "这一步不能做：{call}{rule}。",
        "rule": "（{rule}）",
    },
}
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


def _declines(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is the user declining the requests waiting for them (the marker the loop acts on)."""
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and user_decision(content) == "decline_request"


def _call_text(action: Mapping[str, Any]) -> str:
    """A refused call as the refusal names it: the tool, then the values of its ``compare_args`` (the arguments
    that identify it), else of every argument but the idempotency key."""
    arguments = action.get("arguments") or {}
    keys = action.get("compare_args")
    keys = [k for k in arguments if k != IDEMPOTENCY_KEY] if keys is None else keys
    values = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in (arguments.get(k) for k in keys)]
    return " ".join([action["name"], *values])


def _refusal(lines: Mapping[str, str], action: Mapping[str, Any]) -> str:
    rule = lines["rule"].format(rule=action["rule"]) if action.get("rule") else ""
    return lines["refuse"].format(call=_call_text(action), rule=rule)


class GoldAgent:
    """One scripted call per turn; then one message with every expected output; then a closing line.

    A write the harness holds for approval is put to the user (in the user's language). When the user's reply
    declines it (a ``declined`` entry of the script), the agent says it has not done it and goes on; otherwise it
    sends the write again: the user approved it. A ``refused`` entry is never sent: the message after the calls
    says the agent cannot make it, naming the call and its rule, before the expected outputs. That message closes
    with "done" only when the script holds neither kind of entry."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        script = scripted_actions(task)
        self.actions = [a for a in script if a.get("outcome") != "refused"]  # the calls it sends, in order
        self.refused = [a for a in script if a.get("outcome") == "refused"]
        self.plain = all("outcome" not in a for a in script)
        self.outputs = expected_outputs(task)
        self.step = 0
        self.held: str | None = None  # the request of the write waiting for the user's answer

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        lines = LINES["zh" if any(isinstance(u, str) and _CJK.search(u) for u in users) else "en"]
        request = _approval_request(messages[-1]) if messages else None
        if request is not None:
            self.held = request
            return lines["ask"].format(request=request)
        if self.held is not None:
            held, self.held = self.held, None
            if _declines(messages[-1]):
                return lines["declined"].format(request=held)
            self.step -= 1  # not declined: the held write goes again (it runs once approved)
        step, self.step = self.step, self.step + 1
        if step < len(self.actions):
            action = self.actions[step]
            return hermes_call(action["name"], action.get("arguments") or {})
        closing = lines["done"] if self.plain else lines["more"]
        if step > len(self.actions):
            return closing
        found = lines["found"].format(outputs="; ".join(self.outputs)) if self.outputs else ""
        return "".join(_refusal(lines, a) for a in self.refused) + found + closing
