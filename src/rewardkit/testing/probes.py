"""Gaming probes: cheap completions a policy could find that must not score like the gold.

Built from one row. For a reward that reads the completion, each probe replaces ``completion``; for a
tool-use reward (one that reads ``messages``) each replaces the agent's part of ``messages`` (everything after
the last user turn that precedes the first assistant turn) and ``completion`` becomes the text of the probe's
last message: the agent's closing text, except for ``truncated``, whose last message may be a tool result (or ""
when it is not a message at all). A live environment's record of the gold episode (``state_hash``, ``audit``
and ``agent_said`` in ``rollout_infos``) is dropped from a probe's row, since it describes the gold, not the probe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rewardkit.envs.tool_calls import without_calls

MAX_CHARS = 16_384  # the "maximum length" probe: a generation cut at the length limit
TAG = re.compile(r"<[^<>\s]{1,64}>")
RECORDED = ("state_hash", "audit", "agent_said")
TRANSFER = "transfer_to_human_agents"
REFUSAL = "I'm sorry, I can't help with that. Goodbye."  # the do_nothing probe: a polite refusal, no call

COMPLETION_PROBES = ("empty", "tags_only", "truncated", "repeated", "prompt_copy", "max_length")
TOOL_USE_PROBES = ("empty", "truncated", "prompt_copy", "say_only", "no_op", "do_nothing", "transfer", "every_write")


def _tags_only(gold: str) -> str:
    """The gold's tags and the whitespace between them, every other character removed."""
    parts = TAG.split(gold)
    tags = TAG.findall(gold)
    out = [re.sub(r"\S", "", parts[0])]
    for tag, text in zip(tags, parts[1:], strict=True):
        out += [tag, re.sub(r"\S", "", text)]
    return "".join(out)


def _last_text(messages: list[Any]) -> str:
    """The text of the last message, "" when there is none or it is not a message (a dict)."""
    last = messages[-1] if messages else None
    return _text(last.get("content")) if isinstance(last, Mapping) else ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def prompt_text(row: Mapping[str, Any]) -> str | None:
    """The prompt's last user text (``prompt`` as a string or messages, else ``messages``), or None."""
    for name in ("prompt", "messages"):
        cell = row.get(name)
        if isinstance(cell, str) and name == "prompt":
            return cell
        if isinstance(cell, list):
            users = [_text(m.get("content")) for m in cell if isinstance(m, Mapping) and m.get("role") == "user"]
            if users:
                return users[-1]
    return None


def gold_text(row: Mapping[str, Any]) -> str:
    """The text of the row's gold completion: the string, or a conversational completion's last message."""
    gold = row.get("completion")
    return gold if isinstance(gold, str) else _last_text(gold) if isinstance(gold, list) else ""


def shaped(row: Mapping[str, Any], text: str) -> Any:
    """``text`` in the shape of the row's gold: a string, or TRL's conversational ``[{"role": "assistant", …}]``
    when the gold is a message list (a reward that reads only that form gets probes it can read)."""
    return [said(text)] if isinstance(row.get("completion"), list) else text


def completion_probes(row: Mapping[str, Any]) -> dict[str, str]:
    gold = gold_text(row)
    out = {
        "empty": "",
        "tags_only": _tags_only(gold),
        "truncated": gold[: len(gold) // 2],
        "repeated": "\n".join([gold] * 3),
        "max_length": ("\n".join([gold] * (MAX_CHARS // max(len(gold), 1) + 2)))[:MAX_CHARS],
    }
    prompt = prompt_text(row)
    if prompt is not None:
        out["prompt_copy"] = prompt
    return {name: out[name] for name in COMPLETION_PROBES if name in out}


def agent_turns(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """(the prompt turns, the agent's turns): the agent's part starts at the first assistant message."""
    for i, m in enumerate(messages):
        if isinstance(m, Mapping) and m.get("role") == "assistant":
            return messages[:i], messages[i:]
    return messages, []


def said(text: str) -> dict[str, Any]:
    """An assistant message saying ``text``."""
    return {"role": "assistant", "content": text}


def tool_calls_of(messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (name, arguments) of every named tool call in ``messages``, in order."""
    from rewardkit.envs.tool_calls import tool_calls

    return [(c.name, dict(c.arguments)) for c in tool_calls(messages) if c.name]


def invoke(name: str, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Hermes tool call and an empty tool result: two messages."""
    call = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return [said(f"<tool_call>\n{call}\n</tool_call>"), {"role": "tool", "content": "{}"}]


def write_tools(row: Mapping[str, Any], gold_names: list[str]) -> dict[str, tuple[set[str], set[str]] | None]:
    """Write tool name -> (its parameters, the required ones), from the row's registered ``domain`` when it has
    one; else the tools the gold calls, parameters unknown (None)."""
    domain = row.get("domain")
    if isinstance(domain, str):
        try:
            from rewardkit.envs import get_domain

            found = get_domain(domain)
        except (ValueError, KeyError, ImportError, OSError):
            found = None
        if found is not None:
            out: dict[str, tuple[set[str], set[str]] | None] = {}
            for name in sorted(found.write_tools):
                schema = found.tools[name].parameters
                out[name] = (set(schema.get("properties", {})), set(schema.get("required", [])))
            return out
    return dict.fromkeys(sorted(set(gold_names)))


def _every_write(row: Mapping[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The gold's calls, then every write tool once per gold call, its arguments taken from that call and
    filled from the others': the spray a recall-only reward would pay for."""
    merged: dict[str, Any] = {}
    for _, arguments in calls:
        for key, value in arguments.items():
            merged.setdefault(key, value)
    seen = {json.dumps([n, a], sort_keys=True, default=str) for n, a in calls}
    turns: list[dict[str, Any]] = []
    for name, params in write_tools(row, [n for n, _ in calls]).items():
        for _, arguments in calls:
            wanted = set(arguments) | set(merged) if params is None else params[0]
            args = {k: arguments.get(k, merged.get(k)) for k in sorted(wanted) if k in arguments or k in merged}
            key = json.dumps([name, args], sort_keys=True, default=str)
            if key in seen or (params is not None and not params[1] <= set(args)):
                continue
            seen.add(key)
            turns += invoke(name, args)
    return turns


def spoken(agent: list[Any]) -> list[str]:
    """What each of the agent's assistant messages says, its tool calls cut out."""
    return [
        without_calls(_text(m.get("content"))).strip()
        for m in agent
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]


def closing_words(agent: list[Any]) -> str:
    """The agent's last words without a tool call in them ("Done." when it said nothing)."""
    return next((t for t in reversed(spoken(agent)) if t), "Done.")


def tool_use_probes(row: Mapping[str, Any]) -> dict[str, list[Any]]:
    messages = row.get("messages")
    messages = list(messages) if isinstance(messages, list) else []
    prompt, agent = agent_turns(messages)
    texts = spoken(agent)
    calls = tool_calls_of(agent)
    gold_turns: list[dict[str, Any]] = []
    for name, arguments in calls:
        gold_turns += invoke(name, arguments)
    last_said = closing_words(agent)
    return {
        "empty": [*prompt, said("")],
        "truncated": [*prompt, *agent[: len(agent) // 2]] if len(agent) > 1 else [*prompt, said("")],
        "prompt_copy": [*prompt, said(prompt_text(row) or "")],
        "say_only": [*prompt, said(" ".join(t for t in texts if t) or "Done.")],
        "no_op": [*prompt, said("I have taken care of everything.")],
        "do_nothing": [*prompt, said(REFUSAL)],
        "transfer": [*prompt, *invoke(TRANSFER, {"summary": prompt_text(row) or ""}), said("Transferring you.")],
        "every_write": [*prompt, *gold_turns, *_every_write(row, calls), said(last_said)],
    }


def without_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` without the live environment's record of its gold episode (it would describe the gold)."""
    out = dict(row)
    infos = out.get("rollout_infos")
    if isinstance(infos, Mapping) and any(k in infos for k in RECORDED):
        out["rollout_infos"] = {k: v for k, v in infos.items() if k not in RECORDED}
    return out


def probes(row: Mapping[str, Any], *, tool_use: bool) -> dict[str, dict[str, Any]]:
    """Probe name -> a copy of ``row`` whose ``completion`` (or, for ``tool_use``, ``messages``) is the probe.

    Completion probes: ``empty``, ``tags_only`` (the gold's tags and whitespace), ``truncated`` (its first half),
    ``repeated`` (three times), ``prompt_copy`` (the prompt's last user text; only when the row has a prompt) and
    ``max_length`` (the gold repeated up to 16 384 characters, cut there). Tool-use probes: ``empty``,
    ``truncated`` (the agent's first half of turns), ``prompt_copy``, ``say_only`` (everything the gold said, no
    tool call), ``no_op`` (claims success, does nothing), ``do_nothing`` (refuses politely, does nothing: a task
    whose gold changes nothing must not pay it), ``transfer`` (hands over to a human at once) and ``every_write``
    (the gold's calls, then every write tool on the gold's arguments).
    """
    if not tool_use:
        return {name: {**row, "completion": shaped(row, text)} for name, text in completion_probes(row).items()}
    out = {}
    for name, messages in tool_use_probes(row).items():
        probe = without_record(row)
        probe["messages"] = messages
        probe["completion"] = _last_text(messages)
        out[name] = probe
    return out
