"""Completions as text, whichever trainer passes them.

ms-swift passes each completion as a string. TRL's ``GRPOTrainer`` on a
conversational dataset passes a list of messages, e.g.
``[{"role": "assistant", "content": "..."}]`` (after tool calls, the assistant,
tool and again assistant turns). A reward reads the text of the last assistant
message. Before, ``str(list)`` was scored and every such completion got 0.0
silently, so any other shape now raises instead of being guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SHAPES = "pass a string or TRL's conversational list of messages"


class CompletionShapeError(TypeError):
    """A completion is neither a string nor a list of chat messages (a trainer or pipeline bug)."""


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _shape(value: Any) -> str:
    """The shape in words, for error messages: "a dict", "a list of int", "an empty list"."""
    if value is None:
        return "None"
    name = type(value).__name__
    if isinstance(value, (list, tuple)):
        inner = " and ".join(sorted({type(v).__name__ for v in value}))
        return f"{_a(name)} of {inner}" if inner else f"an empty {name}"
    return _a(name)


def _content_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if content is None:  # an assistant turn with tool calls only: it said nothing
        return ""
    if isinstance(content, (list, tuple)):
        parts: list[str] = []
        for part in content:
            if not isinstance(part, Mapping):
                break
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    break
                parts.append(part["text"])
            # other parts (images, audio) carry no text to score
        else:
            return "".join(parts)
    raise CompletionShapeError(
        f"completion {i}: the last assistant message's content is {_shape(content)}; "
        "it must be a string or a list of {'type': 'text', 'text': ...} parts"
    )


def is_conversational(completion: Any) -> bool:
    """A non-empty list of message dicts, as TRL passes for a conversational dataset."""
    return (
        isinstance(completion, (list, tuple))
        and bool(completion)
        and all(isinstance(m, Mapping) and "role" in m for m in completion)
    )


def completion_text(completion: Any, i: int) -> str:
    """The text a reward scores: the string itself, or the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    if is_conversational(completion):
        for message in reversed(completion):
            if message["role"] == "assistant":
                return _content_text(message.get("content"), i)
        raise CompletionShapeError(f"completion {i} is a list of messages without an assistant message; {SHAPES}")
    raise CompletionShapeError(f"completion {i} is {_shape(completion)}; {SHAPES}")


def completion_texts(completions: Iterable[Any], strict: bool = True) -> list[str]:
    """Every completion's text. ``strict=False`` is for rewards that never read the text: an unknown
    shape becomes its ``str()`` as before (ms-swift >= 4.6 may pass a multi-turn turn as token ids)."""
    if isinstance(completions, (str, bytes, Mapping)) or not isinstance(completions, Iterable):
        raise CompletionShapeError(f"completions must be a list with one per row; got {_shape(completions)}")
    return [_text(c, i, strict) for i, c in enumerate(completions)]


def _text(completion: Any, i: int, strict: bool) -> str:
    try:
        return completion_text(completion, i)
    except CompletionShapeError:
        if strict:
            raise
        return str(completion)
