"""Read an agent's tool calls out of chat messages, in the forms ms-swift rollouts produce.

- Qwen/Hermes: assistant content with one or more
  ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` blocks;
- ms-swift's agent format: a ``{"role": "tool_call", "content": "<json>"}`` message;
- OpenAI: ``tool_calls=[{"type": "function", "function": {"name": …, "arguments": "<json>"}}]``
  on an assistant message (``arguments`` may also be an object already).

A call whose JSON does not parse is still returned, with ``error`` set, so the
environment can answer it with a structured error instead of dropping it.
Messages are the model's output: nothing in them makes these functions raise.
Malformed calls (``tool_calls: "abc"``, a ``function`` of null, arguments that
are not a JSON object or hold NaN) come back with ``error`` set; messages that
are not objects, and contents that are not strings, are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None  # why the call could not be decoded


def _decode_arguments(raw: Any) -> tuple[Mapping[str, Any], str | None]:
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            raw = json.loads(raw, parse_constant=_no_constant)
        except (TypeError, ValueError, RecursionError):
            return {}, f"arguments are not valid JSON: {str(raw)[:80]!r}"
    if not isinstance(raw, Mapping):
        return {}, "arguments must be a JSON object"
    try:  # what the harness stores and hashes, read back as the tool gets it: strict JSON, string keys, no tuples
        same = json.loads(json.dumps(raw, sort_keys=True, allow_nan=False)) == raw
    except (TypeError, ValueError, RecursionError):
        same = False
    if not same:  # json.dumps writes {1: ...} as {"1": ...} and (1, 2) as [1, 2]: the tool would get another object
        return {}, "arguments must be a JSON object (string keys, finite numbers, not nested too deeply)"
    return raw, None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python's json accepts them, JSON does not


def _call(data: Any) -> ToolCall:
    """One decoded ``{"name", "arguments"}`` object (Hermes body, ms-swift message, OpenAI function)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        return ToolCall("", {}, "tool call needs a string 'name'")
    arguments, error = _decode_arguments(data.get("arguments", data.get("parameters")))
    return ToolCall(data["name"], arguments, error)


def _blocks(text: str) -> Iterator[tuple[int, int, int, int]]:
    """``(start, body_start, body_end, end)`` of each closed ``<tool_call>`` block, in order: an opening, then the
    first closing after it (the non-greedy reading). One pass with ``str.find``: an opening that no closing follows
    ends the scan, since no later opening can be closed either. A regex (``<tool_call>(.*?)</tool_call>``) retries
    from every opening instead, which is quadratic in the openings of a text that never closes them."""
    at = 0
    while (start := text.find(OPEN, at)) >= 0:
        body = start + len(OPEN)
        close = text.find(CLOSE, body)
        if close < 0:
            return
        at = close + len(CLOSE)
        yield start, body, close, at


def _hermes(content: str) -> list[ToolCall]:
    calls = []
    for _, start, end, _ in _blocks(content):
        body = content[start:end]
        try:
            data = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            calls.append(ToolCall("", {}, f"tool call is not valid JSON: {body.strip()[:80]!r}"))
            continue
        calls.append(_call(data))
    return calls


def _openai(raw: Any) -> list[ToolCall]:
    if not isinstance(raw, list):
        return [ToolCall("", {}, f"tool_calls must be a list of tool-call objects; got {type(raw).__name__}")]
    calls = []
    for call in raw:
        fn = call.get("function", call) if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            calls.append(ToolCall("", {}, "a tool call must be an object whose 'function' is an object"))
            continue
        calls.append(_call(fn))
    return calls


def tool_calls(messages: Iterable[Any]) -> list[ToolCall]:
    """Every tool call the assistant made, in order."""
    calls: list[ToolCall] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue  # not a message at all: nothing the environment could have run
        role, content = message.get("role"), message.get("content")
        if role == "tool_call":  # ms-swift's own agent format: one call per message, JSON content
            if isinstance(content, str):
                calls += _hermes(f"{OPEN}{content}{CLOSE}")
            else:
                calls.append(ToolCall("", {}, "a tool_call message needs JSON text as its content"))
            continue
        if role != "assistant":
            continue
        if message.get("tool_calls"):
            calls += _openai(message["tool_calls"])
        if isinstance(content, str) and OPEN in content:
            calls += _hermes(content)
    return calls


def without_calls(text: str) -> str:
    """An assistant message's text with its ``<tool_call>`` blocks taken out, each left as one space: what it says
    to the user."""
    parts, at = [], 0
    for start, _, _, end in _blocks(text):
        parts += [text[at:start], " "]
        at = end
    return "".join(parts) + text[at:]


def user_facing_texts(messages: Iterable[Any]) -> list[str]:
    """The assistant's messages to the user, one string each, tool-call blocks removed."""
    return [
        without_calls(m["content"])
        for m in messages
        if isinstance(m, Mapping) and m.get("role") == "assistant" and isinstance(m.get("content"), str)
    ]
