"""The checks a proposed task passes on the real environment before ``rewardkit tasks generate`` keeps it.

Each check names the reason a task is rejected for, in this order: the shared task checks
(:func:`~rewardkit.envs.tasks.task_problem`), ``gold_fails`` (a gold call, read or write, not OK on a fresh
environment), ``no_change`` (gold writes that leave the state hash as it was, or a plain or gated task without a
write), ``no_evidence`` (a gold that changes nothing and names nothing an episode must show instead: an output, a
transfer, a declined write), ``outputs_unsupported`` and ``do_nothing_passes`` (``rewardkit env check``'s outputs and
episode checks, on every task) and
``duplicate`` (the same gold as a domain task or an earlier kept one, or a near-same request with the same tools).
It scores with the rewards, so it lives in ``rewardkit.runs``, like :mod:`rewardkit.runs.domains.domain_check`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from rewardkit.envs import Domain
from rewardkit.envs.outcomes import run_gold, run_script
from rewardkit.envs.tasks import (
    error_text,
    gold_entries,
    gold_problem,
    reason_for_call,
    scripted_actions,
    task_problem,
)
from rewardkit.envs.tool import IDEMPOTENCY_KEY
from rewardkit.rewards import TaskCompletion
from rewardkit.runs.domains.domain_check import Gold, episode_checks, outputs_check, words_fall_short

SIMILAR = 92  # rapidfuzz token_set_ratio of two reasons for calling, on the same calls but for numbers: a duplicate
WRITING_KINDS = ("plain", "gated")  # kinds whose gold must write


def _entry(action: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[Any]:
    """One scripted action as the duplicate checks compare it: a declined or refused entry keeps its ``outcome`` (a
    task that refuses a write is not the task that only reads alike)."""
    return [action["name"], arguments, *([action["outcome"]] if "outcome" in action else [])]


def canonical(task: Mapping[str, Any]) -> str:
    """The scripted actions as one string: names and arguments, sorted keys, without the idempotency key."""
    actions = [
        _entry(a, {k: v for k, v in (a.get("arguments") or {}).items() if k != IDEMPOTENCY_KEY})
        for a in scripted_actions(task)
    ]
    return json.dumps(actions, sort_keys=True, ensure_ascii=False)


def _named(key: str, value: Any) -> bool:
    """Whether an argument is kept by :func:`_names`: not the idempotency key, not a number."""
    return key != IDEMPOTENCY_KEY and (isinstance(value, bool) or not isinstance(value, (int, float)))


def _names(task: Mapping[str, Any]) -> str:
    """The scripted calls with their numbers left out: the tools, and every argument that is not a number (ids,
    texts). Two requests worded alike on these are the same task with another number; on other ids they are two
    tasks (a request without spaces, in Chinese, is one token, and reads as alike whatever its ids)."""
    calls = [
        _entry(a, {k: v for k, v in (a.get("arguments") or {}).items() if _named(k, v)}) for a in scripted_actions(task)
    ]
    return json.dumps(calls, sort_keys=True, ensure_ascii=False)


@dataclass
class Seen:
    """The tasks a new one must differ from: the domain's own, then each one kept."""

    golds: set[str] = field(default_factory=set)
    reasons: list[tuple[str, str]] = field(default_factory=list)

    def add(self, task: Mapping[str, Any]) -> None:
        self.golds.add(canonical(task))
        self.reasons.append((_names(task), reason_for_call(task) or ""))

    def duplicate(self, task: Mapping[str, Any]) -> str | None:
        """Why ``task`` repeats a seen one, or None."""
        if canonical(task) in self.golds:
            return "the same gold actions as a domain task or an earlier kept one"
        names, reason = _names(task), reason_for_call(task) or ""
        for other_names, other in self.reasons:
            score = fuzz.token_set_ratio(reason, other)
            if other_names == names and score >= SIMILAR:
                return f"reason_for_call {score:.0f}% like {other[:60]!r}, on the same calls but for their numbers"
        return None


def seen_from(tasks: Iterable[Mapping[str, Any]]) -> Seen:
    """A :class:`Seen` holding ``tasks`` (those with usable criteria)."""
    seen = Seen()
    for task in tasks:
        if task_problem(task) is None:
            seen.add(task)
    return seen


def _replay(domain: Domain, task: Mapping[str, Any]) -> tuple[str, str] | Gold:
    """The gold on a fresh environment: a rejection, or the :class:`Gold` the outputs check reads."""
    entries = gold_entries(task)  # each with its index in evaluation_criteria.actions, as gold_problem names it
    writes = sum(a["name"] in domain.write_tools for _, a in entries)
    try:
        results, changed_state = run_gold(domain, task)
        script = run_script(domain, task)
    except Exception as exc:  # a bug in the domain's tools: this task is rejected, the run goes on
        return "gold_fails", f"replaying the gold raised {type(exc).__name__}: {exc}"
    for (i, action), result in zip(entries, results, strict=True):
        if not result.ok:
            return "gold_fails", f"actions[{i}] {action['name']}: {error_text(result)}"
    if writes and not changed_state:
        return "no_change", "the gold writes leave the state hash unchanged"
    if not writes and task.get("kind") in WRITING_KINDS:
        return "no_change", f"a {task.get('kind')} task must write; its gold only reads"
    replayed = [(r.ok, None) for r in results]  # all OK (above): what is left to judge is the evidence
    stops = domain.stop_tools
    empty = gold_problem(
        task, replayed, domain.write_tools, changes_state=changed_state, stop_tools=stops, script=script
    )
    if empty is not None:
        return empty
    return Gold(None, tuple(r.text() for r in results), words_fall_short(domain, task, bool(writes)), True)


def rejection(domain: Domain, ref: str, task: Mapping[str, Any], seen: Seen) -> tuple[str, str] | None:
    """``(reason, detail)`` for the first check ``task`` fails, else None (it may be kept)."""
    found = task_problem(task, domain.tools, domain.name)
    if found is not None:
        return found
    gold = _replay(domain, task)
    if not isinstance(gold, Gold):
        return gold
    outputs = outputs_check(task["id"], task, gold)
    if not outputs.passed:
        return "outputs_unsupported", outputs.detail
    episodes = episode_checks(TaskCompletion(), ref, task["id"], task, gold.say_only)
    failed = [c for c in episodes if c is not None and not c.passed]
    if failed:
        return "do_nothing_passes", failed[0].detail
    why = seen.duplicate(task)
    return ("duplicate", why) if why is not None else None
