"""Task selection: which of a domain's tasks a run plays, and the unusable ones it leaves out."""

from __future__ import annotations

from collections.abc import Sequence

from rewardkit.envs import Domain
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.runs.episodes.episode_log import RunError


def select_tasks(
    domain: Domain, split: str, task_ids: Sequence[str] | None, limit: int | None
) -> tuple[list[dict], dict[str, str]]:
    """The split's usable tasks in split order, narrowed to ``task_ids`` and cut to the first ``limit``; and the
    unusable ones left out on the way, id -> why (the task checks and the gold replay of
    :mod:`rewardkit.envs.outcomes`; with ``limit``, none past the last task taken is checked).

    A task named in ``task_ids`` that is unusable is an error: it was asked for by name.
    """
    splits = domain.splits()
    if split not in splits:
        raise RunError(f"--split {split!r}: {domain.name} has splits {', '.join(sorted(splits))}")
    tasks = domain.tasks()
    ids = [i for i in splits[split] if i in tasks]
    if task_ids:
        unknown = sorted(set(task_ids) - set(ids))
        if unknown:
            raise RunError(f"--tasks: {', '.join(unknown)} not in the {split} split of {domain.name}")
        ids = [i for i in ids if i in set(task_ids)]
    unusable: dict[str, str] = {}
    usable: list[str] = []
    for i in ids:
        if limit is not None and len(usable) == limit:  # checked no further: a check may cost a model call (B1)
            break
        verdict = task_verdict(domain.name, tasks[i])
        if verdict.playable:
            usable.append(i)
        else:
            unusable[i] = ": ".join(verdict.problem or ())
    if task_ids and unusable:
        first = next(iter(unusable))
        raise RunError(f"--tasks: task {first} of {domain.name} cannot be judged ({unusable[first]}); leave it out")
    ids = usable
    if not ids:
        raise RunError(f"no tasks selected from the {split} split of {domain.name}")
    return [tasks[i] for i in ids], unusable
