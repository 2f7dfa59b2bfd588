"""A tasks file (``rewardkit tasks generate``'s output, a JSON list of tau2 tasks) in place of a domain's own tasks:
``synth agent --task-file``, ``eval agent --task-file`` and ``env check --tasks``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.envs import Domain
from rewardkit.runs.episodes.episode_log import RunError

SPLIT = "all"  # the one split of a tasks file


def read_tasks(path: Path, flag: str) -> dict[str, dict[str, Any]]:
    """The file's tasks by id; :class:`RunError` naming ``flag`` and the file when it is not a list of tasks with
    unique ids."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{flag} {path}: not found") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise RunError(f"{flag} {path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, list) or not data:
        raise RunError(f"{flag} {path}: must hold a non-empty JSON list of task objects")
    tasks: dict[str, dict[str, Any]] = {}
    for i, task in enumerate(data):
        if not isinstance(task, Mapping) or not isinstance(task.get("id"), str | int):
            raise RunError(f"{flag} {path}: item {i} is not a task object with an id")
        if str(task["id"]) in tasks:
            raise RunError(f"{flag} {path}: task id {task['id']!r} appears twice")
        tasks[str(task["id"])] = {**task, "id": str(task["id"])}
    return tasks


def with_task_file(domain: Domain, path: Path) -> tuple[Domain, str]:
    """``domain`` with the file's tasks in one split, ``all``; and the file's sha256 (part of a run's fingerprint)."""
    tasks = read_tasks(path, "--task-file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    ids = list(tasks)
    return dataclasses.replace(domain, tasks=lambda: tasks, splits=lambda: {SPLIT: list(ids)}), digest
