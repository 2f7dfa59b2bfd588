"""Verified agent trajectories -> ms-swift agent-format SFT rows (the cold start of MUA-RL).

A trajectory is the conversation one episode left (system, user, assistant, tool, ...), its
assistant messages as the policy wrote them: text, Hermes ``<tool_call>`` blocks, or OpenAI
``tool_calls``. The row splits each assistant message into its text (think block kept) and
one ``tool_call`` message per call, and keeps tool results as ``tool`` messages::

    {"messages": [{"role": "system", "content": "<policy>"},
                  {"role": "user", "content": "I want to cancel order #W6779827."},
                  {"role": "tool_call", "content": "{\\"name\\": \\"find_user_id_by_email\\", \\"arguments\\": {…}}"},
                  {"role": "tool", "content": "{\\"code\\": \\"OK\\", …}"},
                  {"role": "assistant", "content": "Your order is cancelled."}, …],
     "tools": "[{\\"type\\": \\"function\\", …}]"}

ms-swift's agent template renders ``tool_call`` messages in the model's own call syntax and
trains only the assistant side (text and calls); user and tool messages carry no loss
(``tests/test_synth.py`` checks this against ms-swift's encoder).

``sft_row`` returns the reason instead of a row when a trajectory must not be taught:
``malformed_tool_call`` (a call that does not decode: the model would learn to emit it) and
``empty_assistant_turn`` (a message with neither text nor calls) and ``no_agent_turn`` (no assistant
message at all, as when the simulated user stops before the agent speaks: a row of prompts only
would teach nothing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.tool_calls import tool_calls, user_facing_texts

MALFORMED = "malformed_tool_call"
EMPTY_TURN = "empty_assistant_turn"
NO_AGENT_TURN = "no_agent_turn"


def sft_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]] | str:
    """The agent-format messages of one trajectory, or the reason it cannot be one."""
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            calls = tool_calls([message])
            if any(c.error is not None for c in calls):
                return MALFORMED
            text = "".join(user_facing_texts([message])).strip()
            if not text and not calls:
                return EMPTY_TURN
            if text:
                out.append({"role": "assistant", "content": text})
            for call in calls:
                body = {"name": call.name, "arguments": dict(call.arguments)}
                out.append({"role": "tool_call", "content": json.dumps(body, ensure_ascii=False)})
        elif role in ("system", "user", "tool"):
            out.append({"role": role, "content": content if isinstance(content, str) else json.dumps(content)})
        else:
            raise ValueError(f"a trajectory message with role {role!r}; expected system, user, assistant or tool")
    return out


def sft_row(messages: Sequence[Mapping[str, Any]], tools_json: str | None) -> dict[str, Any] | str:
    """One SFT row, or the reason the trajectory is rejected; ``tools_json`` None leaves the column out."""
    converted = sft_messages(messages)
    if isinstance(converted, str):
        return converted
    if not any(m["role"] in ("assistant", "tool_call") for m in converted):
        return NO_AGENT_TURN
    row: dict[str, Any] = {"messages": converted}
    if tools_json is not None:
        row["tools"] = tools_json
    return row


def trajectory_key(row: Mapping[str, Any]) -> str:
    """Identical conversations give one key (repeated trials of a deterministic agent are duplicates)."""
    return json.dumps(row["messages"], sort_keys=True, ensure_ascii=False)
