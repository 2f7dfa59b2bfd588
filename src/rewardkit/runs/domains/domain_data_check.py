"""The checks of ``rewardkit env check`` on a domain's data as a whole: its task ids, its splits, its policy and its
user simulator's guidelines (the per-task and per-tool checks are in :mod:`rewardkit.runs.domains.domain_check`).

A finding says how to fix it where the domain declares it: a domain given as a spec (:func:`is_spec`) by the keys of
its ``domain.json``, whose author writes no Python; any other domain by the arguments of its ``Domain``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from itertools import combinations
from typing import Any

from rewardkit.envs import Domain
from rewardkit.envs.spec_domain import SPEC_FILE
from rewardkit.testing.report import Check


def is_spec(domain: Domain) -> bool:
    """Whether ``domain`` is given as a spec (``domain.json``): its tools answered from each task's memory."""
    return domain.simulation is not None


def _tasks_file_ids(domain: Domain) -> list[tuple[str, Counter[str]]]:
    """The ids of each bundled JSON file that holds a list of task objects (what ``tasks()`` may have deduplicated
    silently into a dict)."""
    found = []
    for path in domain.data_files:
        try:
            text = path.read_text(encoding="utf-8") if path.suffix == ".json" else ""
            items = json.loads(text) if text.lstrip().startswith("[") else None
        except (OSError, ValueError, RecursionError):
            continue  # unreadable: tasks() or the commands that read it say so
        if isinstance(items, list) and all(isinstance(t, Mapping) and "evaluation_criteria" in t for t in items):
            found.append((path.name, Counter(str(t.get("id")) for t in items)))
    return found


def ids_check(domain: Domain, tasks: Mapping[Any, Any]) -> Check:
    """Task ids are unique: each key of ``tasks()`` is its task's own ``id``, and no bundled tasks file repeats
    one (a dict built from it would keep one of the two and drop the other without a word)."""
    problems = [] if tasks else ["the domain has no tasks"]
    own = {k: t["id"] for k, t in tasks.items() if isinstance(t, Mapping) and "id" in t}
    problems += [f"tasks() key {k!r} holds task {i!r}" for k, i in own.items() if str(i) != str(k)][:3]
    keys = [k for k, n in Counter(map(str, tasks)).items() if n > 1]
    problems += [f"tasks() keys {k!r} twice (as a string and a number)" for k in keys[:3]]
    for name, counts in _tasks_file_ids(domain):
        repeated = [f"{i!r} ({n} tasks)" for i, n in counts.items() if n > 1]
        problems += [f"{name} repeats task id {', '.join(repeated[:5])}"] if repeated else []
    if problems:
        return Check("ids", False, "; ".join(problems))
    return Check("ids", True, f"{len(tasks)} tasks, each id once")


def policy_check(policy: Any, spec: bool = False) -> Check:
    """The agent's system prompt says something."""
    if isinstance(policy, str) and policy.strip():
        return Check("policy", True, f"{len(policy)} characters")
    if spec:
        why = f"the file {SPEC_FILE}'s policy names is blank: the agent would get no rules; write them in it"
        return Check("policy", False, why)
    return Check("policy", False, f"policy() returns {policy!r:.40}: the agent would get no rules")


def guidelines_check(guidelines: Any, spec: bool = False) -> Check:
    """The user simulator's guidelines say something (an LLM user cannot play the domain without them); a spec's
    are optional (the scripted user plays its tasks without them)."""
    if isinstance(guidelines, str) and guidelines.strip():
        return Check("guidelines", True, f"{len(guidelines)} characters")
    if spec and guidelines is None:
        why = (
            f"none (optional): the scripted user plays the tasks; for an LLM user, name a file of how to play "
            f"the user in {SPEC_FILE}'s guidelines"
        )
        return Check("guidelines", True, why)
    part = "an LLM user simulator would get no part to play"
    if spec:
        return Check(
            "guidelines",
            False,
            f"the file {SPEC_FILE}'s guidelines names is blank: {part}; write in it "
            f"how to play the user, or drop {SPEC_FILE}'s guidelines",
        )
    return Check("guidelines", False, f"guidelines is {guidelines!r:.40}: {part}; give the Domain guidelines=")


def _few(ids: list[str]) -> str:
    return ", ".join(map(repr, ids[:5])) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def _split_problems(splits: Mapping[str, list[str]], tasks: Mapping[str, Any]) -> Iterator[str]:
    """Missing and repeated ids per split; overlaps between splits; tasks in no split. A single split that holds
    every task (tau2's ``base``, the whole set) is left out of the overlap and coverage tests when there are others."""
    for name, ids in splits.items():
        missing = [i for i in dict.fromkeys(ids) if i not in tasks]
        if missing:
            yield f"{name} names {len(missing)} task(s) that do not exist: {_few(missing)}"
        repeated = [i for i, n in Counter(ids).items() if n > 1]
        if repeated:
            yield f"{name} lists {_few(repeated)} twice"
    parts = {n: set(ids) for n, ids in splits.items() if n not in _whole(splits, tasks)}
    for (a, ids_a), (b, ids_b) in combinations(parts.items(), 2):
        if ids_a & ids_b:
            yield f"{a} and {b} share {len(ids_a & ids_b)} task(s): {_few(sorted(ids_a & ids_b))}"
    uncovered = [i for i in tasks if not any(i in ids for ids in parts.values())]
    if uncovered:
        yield f"{len(uncovered)} task(s) in no split: {_few(uncovered)}"


def _whole(splits: Mapping[str, list[str]], tasks: Mapping[str, Any]) -> set[str]:
    """The split that holds every task and nothing else, when it is the only such split and another split holds
    tasks (a train split of every task beside an empty test split is the partition, not a whole set beside it)."""
    full = [n for n, ids in splits.items() if set(ids) == set(tasks)]
    others = any(ids for n, ids in splits.items() if n not in full)
    return set(full) if len(full) == 1 and others else set()


def splits_check(splits: Any, tasks: Mapping[Any, Any], spec: bool = False) -> Check:
    """``splits()`` names only existing tasks, each once per split; the splits are disjoint and cover every task."""
    if not isinstance(splits, Mapping) or not all(isinstance(ids, list) for ids in splits.values()):
        return Check("splits", False, f"splits() must map split names to lists of task ids, got {splits!r:.60}")
    named = {str(n): [str(i) for i in ids] for n, ids in splits.items()}
    by_id = {str(k): t for k, t in tasks.items()}
    problems = list(_split_problems(named, by_id))
    if problems:
        where = f"{SPEC_FILE}'s splits (split name -> task ids): " if spec else ""
        return Check("splits", False, where + "; ".join(problems))
    whole = _whole(named, by_id)
    sizes = ", ".join(f"{n} {len(ids)}" for n, ids in named.items() if n not in whole)
    note = f"; {', '.join(whole)} holds all {len(by_id)} (the whole set, not part of the partition)" if whole else ""
    return Check("splits", True, f"{sizes}: disjoint, every task in one{note}")
