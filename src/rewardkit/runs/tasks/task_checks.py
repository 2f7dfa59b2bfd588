"""The checks a proposed task passes on the real environment before ``rewardkit tasks generate`` keeps it.

Each check names the reason a task is rejected for, in this order: the task's verdict
(:mod:`rewardkit.envs.task_verdict`: its shape, then its gold replayed on a fresh environment: ``gold_fails``,
``bad_outcome_entry``, ``no_change``, ``no_evidence``, ...), stricter for a proposal in two rules (``gold_fails``
for any gold call not OK, a read included; ``no_change`` for a plain or gated task without a write),
``outputs_unsupported`` and ``do_nothing_passes`` (``rewardkit env check``'s outputs and episode checks, on every
task) and ``duplicate`` (the same gold as a domain task or an earlier kept one, or a near-same request with the
same tools).
It scores with the rewards, so it lives in ``rewardkit.runs``, like :mod:`rewardkit.runs.domains.domain_check`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from rewardkit.envs import Domain
from rewardkit.envs.task_verdict import judge_task
from rewardkit.envs.tasks import reason_for_call, scripted_actions, task_problem
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
    """The task's verdict, stricter for a proposal (every gold call succeeds, reads included; a plain or gated task
    writes): a rejection, or the :class:`Gold` the outputs check reads."""
    verdict = judge_task(domain, task)
    failed = verdict.failed_calls()
    if failed:
        i, name, error = failed[0]
        return "gold_fails", f"actions[{i}] {name}: {error}"
    if verdict.problem is not None:
        return verdict.problem
    writes = verdict.writes
    if not writes and task.get("kind") in WRITING_KINDS:
        return "no_change", f"a {task.get('kind')} task must write; its gold only reads"
    return Gold(None, verdict.texts, words_fall_short(domain, task, bool(writes)))


def rejection(domain: Domain, ref: str, task: Mapping[str, Any], seen: Seen) -> tuple[str, str] | None:
    """``(reason, detail)`` for the first check ``task`` fails, else None (it may be kept)."""
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
