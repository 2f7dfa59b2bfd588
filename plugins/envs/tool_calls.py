"""Read an agent's tool calls out of chat messages, in the forms ms-swift rollouts produce.

- Qwen/Hermes: assistant content with one or more
  ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` blocks;
- ms-swift's agent format: a ``{"role": "tool_call", "content": "<json>"}`` message;
- OpenAI: ``tool_calls=[{"type": "function", "function": {"name": …, "arguments": "<json>"}}]``
  on an assistant message (``arguments`` may also be an object already).

A call whose JSON does not parse is still returned, with ``error`` set, so the
environment can answer it with a structured error instead of dropping it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None  # why the call could not be decoded


def _decode_arguments(raw: Any) -> tuple[Mapping[str, Any], str | None]:
    if isinstance(raw, Mapping):
        return raw, None
    if raw is None or raw == "":
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return {}, f"arguments are not valid JSON: {str(raw)[:80]!r}"
    if not isinstance(value, Mapping):
        return {}, "arguments must be a JSON object"
    return value, None


def _hermes(content: str) -> list[ToolCall]:
    calls = []
    for body in _HERMES.findall(content):
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            calls.append(ToolCall("", {}, f"tool call is not valid JSON: {body.strip()[:80]!r}"))
            continue
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            calls.append(ToolCall("", {}, "tool call needs a string 'name'"))
            continue
        arguments, error = _decode_arguments(data.get("arguments", data.get("parameters")))
        calls.append(ToolCall(data["name"], arguments, error))
    return calls


def _openai(tool_calls: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    calls = []
    for call in tool_calls:
        fn = call.get("function", call)
        name = fn.get("name")
        if not isinstance(name, str):
            calls.append(ToolCall("", {}, "tool call needs a string 'name'"))
            continue
        arguments, error = _decode_arguments(fn.get("arguments"))
        calls.append(ToolCall(name, arguments, error))
    return calls


def tool_calls(messages: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """Every tool call the assistant made, in order."""
    calls: list[ToolCall] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "tool_call":  # ms-swift's own agent format: one call per message, JSON content
            calls += _hermes(f"<tool_call>{content}</tool_call>") if isinstance(content, str) else []
            continue
        if role != "assistant":
            continue
        if message.get("tool_calls"):
            calls += _openai(message["tool_calls"])
        if isinstance(content, str) and "<tool_call>" in content:
            calls += _hermes(content)
    return calls


def user_facing_texts(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The assistant's messages to the user, one string each, tool-call blocks removed."""
    return [
        _HERMES.sub(" ", m["content"])
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), str)
    ]


def said_to_user(messages: Iterable[Mapping[str, Any]]) -> str:
    """All of the assistant's text to the user, one message per line."""
    return "\n".join(user_facing_texts(messages))
