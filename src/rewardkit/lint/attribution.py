"""Which tokens of an encoded row are which context message's, as ms-swift's encoder itself places them.

:func:`context_spans` encodes the row a second time, the content of every non-empty system, user and tool message
replaced by a canary: one rare letter whose tokens do not occur in the row. The two encodings differ only where
those contents are, so each stretch of the second encoding between two canaries (template text, agent turns) is
found again in the first, in order (no sooner than the message before it has as many tokens as its content alone,
so a content that quotes the template cannot end early), and what lies between the stretches found are the
messages' tokens. A message's text is never searched for, so a user "yes" after an agent "yes", or a tool result
that repeats its call's argument, cannot be mistaken for the agent's.

Up to ``EDGE`` tokens at each end of a stretch may differ between the encodings (a content's last ``\\n`` fused with
the template's next one): they fall to the message beside them. Canaries with fewer than ``MIN_STRETCH`` tokens
between them are one stretch of the encoding (ms-swift joins consecutive user messages into one), so their
messages share it. Nothing is guessed: when every canary occurs in the row, the second encoding fails or does not
hold each canary once, a stretch is not found, a stretch joins messages of different roles, or a message gets more
or fewer tokens than its content encodes to alone (give or take the edges), :func:`context_spans` returns why, and
the row is ``unattributed``.
"""

from __future__ import annotations

import copy
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONTEXT = ("system", "user", "tool", "tool_response")  # ms-swift encodes tool_response as tool
CANARIES = ("ꙮ", "ᚠ", "ꓘ", "ߊ", "ⴰ", "Ꮚ", "ꔀ", "ᠠ")  # letters: a run of them does not fuse with a "\n" before it
EDGE = 2  # tokens at each end of a stretch that may fuse with the content beside it
MIN_STRETCH = 2  # fewer tokens between two canaries, and their messages share one stretch


@dataclass(frozen=True)
class Span:
    """The tokens ``[lo, hi)`` of the first encoding that are the content of ``messages`` (one, or several that the
    template joins into one stretch)."""

    messages: tuple[int, ...]
    lo: int
    hi: int


def role_of(message: Mapping[str, Any]) -> str:
    """The message's role as the rules name it (ms-swift's ``tool_response`` is a ``tool`` message)."""
    role = str(message.get("role"))
    return "tool" if role == "tool_response" else role


def _packed(ids: Sequence[int]) -> bytes:
    """Token ids as bytes, a fixed width each, so that ``bytes.find`` searches a token sequence in C."""
    return array("I", ids).tobytes()


def _find(hay: bytes, needle: bytes, start: int) -> int:
    """The first token index >= ``start`` where the packed ``needle`` occurs in the packed ``hay``, or -1."""
    width = array("I").itemsize
    at = hay.find(needle, start * width)
    while at >= 0 and at % width:
        at = hay.find(needle, at + 1)
    return at // width if at >= 0 else -1


def _canary(tokenizer: Any, hay: bytes) -> tuple[str, list[int]] | None:
    """The first canary whose tokens do not occur, in that order, anywhere in the row."""
    for canary in CANARIES:
        ids = tokenizer.encode(canary, add_special_tokens=False)
        if ids and _find(hay, _packed(ids), 0) < 0:
            return canary, ids
    return None


def _canary_encoding(template: Any, row: Mapping[str, Any], replaced: Sequence[int], canary: str) -> list[int]:
    """The row's input ids with each replaced message's content the canary; no ``max_length`` (a canary may be
    longer than the content it stands for, and this encoding is only a measurement)."""
    other = copy.deepcopy(dict(row))
    for i in replaced:
        other["messages"][i]["content"] = canary
    max_length, template.max_length = template.max_length, None
    try:
        return list(template.encode(other)["input_ids"])
    finally:
        template.max_length = max_length


def _hits(ids: Sequence[int], canary: Sequence[int]) -> list[int]:
    """Where each canary starts in the second encoding."""
    hay, needle, out = _packed(ids), _packed(canary), []
    at = _find(hay, needle, 0)
    while at >= 0:
        out.append(at)
        at = _find(hay, needle, at + len(canary))
    return out


def _common(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading tokens ``a`` and ``b`` share, at most ``limit``."""
    n = 0
    while n < min(limit, len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _anchor(a: Sequence[int], hay: bytes, stretch: Sequence[int], floor: int, start: int) -> tuple[int, ...] | None:
    """Where ``stretch`` lies in the first encoding, its core at or after ``start`` and its ends not before
    ``floor``: (lo, hi, tokens of its head not found, tokens of its tail not found). The core, ``EDGE`` tokens off
    each end (fewer if it is short), is searched for; the ends are added back as far as they are equal."""
    trim = max(0, min(EDGE, (len(stretch) - MIN_STRETCH) // 2))
    core = stretch[trim : len(stretch) - trim]
    at = _find(hay, _packed(core), start)
    if at < 0:
        return None
    head = tail = 0  # head and tail tokens added back
    while head < trim and at - head > floor and a[at - head - 1] == stretch[trim - head - 1]:
        head += 1
    end = at + len(core)
    while tail < trim and end + tail < len(a) and a[end + tail] == stretch[len(stretch) - trim + tail]:
        tail += 1
    return at - head, end + tail, trim - head, trim - tail


@dataclass(frozen=True)
class _Group:
    """Canaries with fewer than ``MIN_STRETCH`` tokens between them: one stretch of context in the encodings."""

    messages: tuple[int, ...]  # the context messages whose canaries it holds
    start: int  # its first canary's first token in the second encoding
    end: int  # past its last canary's last token
    alone: int  # tokens its messages' contents encode to on their own, joined
    name: str  # "message 3 (tool)", for the reasons


def _groups(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], replaced: Sequence[int], hits: Sequence[int], width: int
) -> list[_Group]:
    """The canaries (``hits``, one per ``replaced`` message) in groups."""
    runs = [[0]]
    for k in range(1, len(hits)):
        if hits[k] - hits[k - 1] - width < MIN_STRETCH:
            runs[-1].append(k)
        else:
            runs.append([k])
    out = []
    for run in runs:
        owners = tuple(replaced[k] for k in run)
        text = "".join(str(messages[i]["content"]) for i in owners)
        alone = len(tokenizer.encode(text, add_special_tokens=False))
        out.append(_Group(owners, hits[run[0]], hits[run[-1]] + width, alone, _name(messages, owners)))
    return out


def _regions(a: Sequence[int], b: Sequence[int], groups: Sequence[_Group]) -> list[tuple[int, int, int]] | str:
    """Per group, the tokens of the first encoding in its place: (lo, hi, how many template tokens at its ends may
    be among them); or why they cannot be placed. The stretch after a group is searched for no sooner than its
    content's own size allows, so a content that quotes the template cannot end its group early."""
    hay, out = _packed(a), []
    cursor = _common(a, b, groups[0].start)
    edge = groups[0].start - cursor  # template tokens before the group that were not found
    if edge > EDGE:
        return f"the template text before {groups[0].name} differs between the two encodings"
    for g, group in enumerate(groups):
        if g + 1 < len(groups):
            stretch = b[group.end : groups[g + 1].start]
            found = _anchor(a, hay, stretch, cursor, cursor + max(0, group.alone - EDGE))
            if found is None:
                return f"what follows {group.name} in the second encoding is not in the first"
            lo, hi, head, tail = found
            out.append((cursor, lo, edge + head))
            cursor, edge = hi, tail
            continue
        rest = b[group.end :]
        matched = _common(a[::-1], rest[::-1], min(len(rest), len(a) - cursor))
        if len(rest) - matched > EDGE:
            return f"the template text after {group.name} differs between the two encodings"
        out.append((cursor, len(a) - matched, edge + len(rest) - matched))
    return out


def _name(messages: Sequence[Mapping[str, Any]], indices: Sequence[int]) -> str:
    """``message 3 (tool)``, ``messages 1, 2 (user, user)``."""
    roles = ", ".join(role_of(messages[i]) for i in indices)
    which = ("message " if len(indices) == 1 else "messages ") + ", ".join(map(str, indices))
    return f"{which} ({roles})"


def _misfit(
    messages: Sequence[Mapping[str, Any]], groups: Sequence[_Group], regions: Sequence[tuple[int, int, int]]
) -> str | None:
    """Why the regions cannot be the groups' tokens: a group of two roles, or a region whose size is not its
    contents' alone, give or take its template tokens, one fused token at each end and the template tokens
    (fewer than ``MIN_STRETCH`` each) between the canaries of a group."""
    for group, (lo, hi, slack) in zip(groups, regions, strict=True):
        if len({role_of(messages[i]) for i in group.messages}) > 1:
            return f"the template joins {group.name} into one stretch"
        if abs(hi - lo - group.alone) > slack + 2 + (MIN_STRETCH - 1) * (len(group.messages) - 1):
            return f"{group.name} gets {hi - lo} tokens in the encoding, but its content alone encodes to {group.alone}"
    return None


def context_spans(template: Any, row: Mapping[str, Any], ids: Sequence[int]) -> tuple[list[Span], str | None]:
    """The tokens of each non-empty context message of the preprocessed ``row`` in its encoding ``ids``, in order;
    or no spans and why they cannot be told (see the module)."""
    messages = row["messages"]
    replaced = [i for i, m in enumerate(messages) if m.get("role") in CONTEXT and m.get("content")]
    if not replaced:
        return [], None
    found = _canary(template.tokenizer, _packed(ids))
    if found is None:
        return [], f"every canary letter ({' '.join(CANARIES)}) occurs in the row"
    canary, canary_ids = found
    try:
        other = _canary_encoding(template, row, replaced, canary)
    except Exception as exc:  # the template takes the row, but not its copy with canaries
        return [], f"the second encoding failed ({type(exc).__name__}: {str(exc)[:120]})"
    hits = _hits(other, canary_ids)
    if len(hits) != len(replaced):
        return [], f"the second encoding holds {len(hits)} canaries for {len(replaced)} context messages"
    groups = _groups(template.tokenizer, messages, replaced, hits, len(canary_ids))
    regions = _regions(ids, other, groups)
    if isinstance(regions, str):
        return [], regions
    why = _misfit(messages, groups, regions)
    if why is not None:
        return [], why
    return [Span(g.messages, lo, hi) for g, (lo, hi, _) in zip(groups, regions, strict=True)], None
