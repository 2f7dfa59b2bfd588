"""Content probes: well-formed answers to the wrong question, built from the rows themselves.

The form probes of :mod:`rewardkit.testing.probes` break the format; these keep it and change what is said, which
is what a GRPO policy that collapses onto one generic answer does. Built from the golds of several rows:

- ``other_gold``: another row's gold (row i takes the gold of the next row, cyclically, whose gold differs from its
  own, so that no row keeps its own);
- ``constant``: the most common gold (the first of the most common, in row order), given to every row whose gold
  differs from it.

And the gold, minimally wrong (the *near misses*, :data:`NEAR_MISS`):

- planning answers (``<answer>{JSON plan}</answer>`` under the ``zh`` or ``en`` answer keys):
  ``swapped_expert`` (the first step whose expert occurs once gets an expert from the row's ``experts`` that the
  plan does not use), ``exchanged_experts`` (the experts of the first two steps with different experts trade
  places: the same set, the wrong assignment), ``dropped_step`` (the last step whose expert occurs once, else the
  last step, removed, its ``depends_on`` references dropped and the later ones renumbered) and ``unrewritten``
  (the rewrite replaced by the row's own question);
- tool use (the agent's turns in ``messages``): ``other_actions`` (another row's tool calls, this row's own words)
  and ``wrong_argument`` (the gold's calls with one argument of its last write call changed, so that no later write
  undoes it: to the value another row's gold gives that argument, else to a value of the same type that differs).

A probe that equals its row's gold is not built for that row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.rewards.answers import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, load_schema, parse
from rewardkit.testing.probes import (
    COMPLETION_PROBES,
    TOOL_USE_PROBES,
    agent_turns,
    closing_words,
    gold_text,
    invoke,
    probes,
    prompt_text,
    said,
    shaped,
    tool_calls_of,
    without_record,
    write_tools,
)

CROSS_ROW = ("other_gold", "constant")
PLAN_PROBES = ("swapped_expert", "exchanged_experts", "dropped_step", "unrewritten")
TOOL_PROBES = ("other_actions", "wrong_argument")
NEAR_MISS = (*PLAN_PROBES, "wrong_argument")  # judged "below the gold", not "a margin below"
# Judged on each row, not by the mean over rows: the near misses, and do_nothing, which a reward that pays nothing
# on a few tasks (a transfer, a refusal) lets through on those rows only, hidden in the mean of the others.
PER_ROW = (*NEAR_MISS, "do_nothing")


CONTENT_PROBES = (*CROSS_ROW, *PLAN_PROBES, *TOOL_PROBES)
# Every probe the kit can build, form and content, each named once in this order.
ALL_PROBES = tuple(dict.fromkeys((*COMPLETION_PROBES, *TOOL_USE_PROBES, *CONTENT_PROBES)))
DEPENDS_ON = "depends_on"


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _gold(row: Mapping[str, Any], tool_use: bool) -> Any:
    if tool_use:
        messages = row.get("messages")
        return agent_turns(messages if isinstance(messages, list) else [])[1]
    return row.get("completion")


def _with(row: Mapping[str, Any], gold: Any, tool_use: bool) -> dict[str, Any]:
    """``row`` answering ``gold``: its completion, or (tool use) its prompt turns then ``gold``'s agent turns."""
    if not tool_use:
        return {**row, "completion": gold}
    messages = row.get("messages")
    prompt = agent_turns(messages if isinstance(messages, list) else [])[0]
    last = gold[-1].get("content") if gold and isinstance(gold[-1], Mapping) else ""
    out = without_record(row)
    return {**out, "messages": [*prompt, *gold], "completion": last if isinstance(last, str) else ""}


def cross_row(golds: Sequence[Any]) -> list[dict[str, Any]]:
    """Per row: ``other_gold`` and ``constant`` (each only where it differs from the row's own gold)."""
    keys = [_key(g) for g in golds]
    counts = Counter(keys)
    top = max(counts.values(), default=0)
    constant = next((i for i, k in enumerate(keys) if counts[k] == top), None)
    out: list[dict[str, Any]] = []
    for i, key in enumerate(keys):
        probes: dict[str, Any] = {}
        other = next((j for j in (*range(i + 1, len(keys)), *range(i)) if keys[j] != key), None)
        if other is not None:
            probes["other_gold"] = golds[other]
        if constant is not None and keys[constant] != key:
            probes["constant"] = golds[constant]
        out.append(probes)
    return out


def _plan_schema(data: Mapping[str, Any]) -> Any:
    """The answer-key preset whose plan key holds a list of steps with its expert key, or None."""
    for preset in ("zh", "en"):
        schema = load_schema(preset)
        steps = data.get(schema.plan_key)
        if isinstance(steps, list) and steps and all(isinstance(s, Mapping) and schema.expert_key in s for s in steps):
            return schema
    return None


def _experts(cell: Any) -> list[str]:
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError:
            return []
    return [e for e in cell if isinstance(e, str)] if isinstance(cell, list) else []


def _dropped(steps: list[dict[str, Any]], drop: int) -> list[dict[str, Any]]:
    """``steps`` without step ``drop``: references to it removed, later indices moved down by one."""
    out = []
    for i, step in enumerate(steps):
        if i == drop:
            continue
        step = dict(step)
        if isinstance(step.get(DEPENDS_ON), list):
            step[DEPENDS_ON] = [d - (d > drop) if isinstance(d, int) else d for d in step[DEPENDS_ON] if d != drop]
        out.append(step)
    return out


def plan_variants(data: Mapping[str, Any], schema: Any, row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The planning near misses of one gold answer, as answer objects."""
    steps = [dict(s) for s in data[schema.plan_key]]
    names = [s.get(schema.expert_key) for s in steps]
    once = [i for i, n in enumerate(names) if names.count(n) == 1]
    out: dict[str, dict[str, Any]] = {}
    unused = [e for e in _experts(row.get("experts")) if e not in names]
    if once and unused:
        swapped = [dict(s) for s in steps]
        swapped[once[0]][schema.expert_key] = unused[0]
        out["swapped_expert"] = {**data, schema.plan_key: swapped}
    pair = next(((0, j) for j in range(1, len(steps)) if names[j] != names[0]), None)
    if pair is not None:
        exchanged = [dict(s) for s in steps]
        a, b = pair
        exchanged[a][schema.expert_key], exchanged[b][schema.expert_key] = names[b], names[a]
        out["exchanged_experts"] = {**data, schema.plan_key: exchanged}
    if len(steps) > 1:
        drop = once[-1] if once else len(steps) - 1
        out["dropped_step"] = {**data, schema.plan_key: _dropped(steps, drop)}
    question = prompt_text(row)
    if schema.rewrite_key in data and question is not None and data[schema.rewrite_key] != question:
        out["unrewritten"] = {**data, schema.rewrite_key: question}
    return out


def plan_probes(row: Mapping[str, Any]) -> dict[str, str]:
    """The planning near misses of the row's gold completion (none when it holds no planning answer)."""
    gold = gold_text(row)
    data = parse(gold).data
    schema = _plan_schema(data) if isinstance(data, Mapping) else None
    if schema is None:
        return {}
    start = gold.find(ANSWER_OPEN, max(gold.find(THINK_CLOSE), 0))  # the answer block parse() read
    end = gold.find(ANSWER_CLOSE, start)
    head, tail = gold[: start + len(ANSWER_OPEN)], gold[end:]
    return {
        name: f"{head}\n{json.dumps(answer, ensure_ascii=False)}\n{tail}"
        for name, answer in plan_variants(data, schema, row).items()
    }


def _changed(value: Any, others: Sequence[Any]) -> Any:
    """Another row's value for the argument when one differs, else a value of the same type that differs."""
    for other in others:
        if _key(other) != _key(value) and type(other) is type(value):
            return other
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return value[:-1] if value else ["0"]
    if isinstance(value, dict):
        return {}
    return f"{value}0"


def tool_probes(row: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``other_actions`` (the first other row's calls whose calls differ) and ``wrong_argument``, as agent turns."""
    agent = _gold(row, True)
    calls = tool_calls_of(agent)
    closing = [said(closing_words(agent))]  # never a tool call: it would redo or undo a write
    out: dict[str, list[Any]] = {}
    for other in others:
        theirs = tool_calls_of(_gold(other, True))
        if theirs and _key(theirs) != _key(calls):
            out["other_actions"] = [*(t for n, a in theirs for t in invoke(n, a)), *closing]
            break
    writes = set(write_tools(row, [n for n, _ in calls]))
    target = next((k for k in reversed(range(len(calls))) if calls[k][0] in writes and calls[k][1]), None)
    if target is not None:
        name, arguments = calls[target]
        arg = sorted(arguments)[0]
        seen = [a[arg] for o in others for n, a in tool_calls_of(_gold(o, True)) if n == name and arg in a]
        changed = [*calls]
        changed[target] = (name, {**arguments, arg: _changed(arguments[arg], seen)})
        out["wrong_argument"] = [*(t for n, a in changed for t in invoke(n, a)), *closing]
    return out


def content_probes(rows: Sequence[Mapping[str, Any]], *, tool_use: bool) -> list[dict[str, dict[str, Any]]]:
    """Per row: content probe name -> a copy of the row answering it (see the module docstring)."""
    golds = [_gold(r, tool_use) for r in rows]
    out: list[dict[str, dict[str, Any]]] = []
    for i, (row, crossed) in enumerate(zip(rows, cross_row(golds), strict=True)):
        built = {name: _with(row, gold, tool_use) for name, gold in crossed.items()}
        if tool_use:
            others = [r for j, r in enumerate(rows) if j != i]
            built.update({n: _with(row, agent, True) for n, agent in tool_probes(row, others).items()})
        else:
            built.update({n: {**row, "completion": shaped(row, text)} for n, text in plan_probes(row).items()})
        own = _key(golds[i])
        out.append({n: p for n, p in built.items() if _key(_gold(p, tool_use)) != own})
    return out


def all_probes(rows: Sequence[Mapping[str, Any]], *, tool_use: bool) -> list[dict[str, dict[str, Any]]]:
    """Per row: every probe of it, the form probes of :func:`~rewardkit.testing.probes.probes` then the content
    probes built across ``rows``."""
    content = content_probes(rows, tool_use=tool_use)
    return [{**probes(row, tool_use=tool_use), **extra} for row, extra in zip(rows, content, strict=True)]
