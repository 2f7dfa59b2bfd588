"""The retail domain object (registered as ``retail``)."""

from __future__ import annotations

import functools
import json
from typing import Any

from rewardkit.envs.domain import Domain, DomainDataError
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.db import TABLES
from rewardkit.envs.retail.tools import TOOLS
from rewardkit.envs.sqlite_env import environment
from rewardkit.envs.tasks import placed

# Every file of data/ that some command reads (SOURCE.md and LICENSE are documentation).
DATA_FILES = tuple(
    DATA_DIR / name for name in ("db.json", "tasks.json", "split_tasks.json", "policy.md", "simulation_guidelines.md")
)
_FIX = "restore the file (reinstall rewardkit) or pass your own file with the command's option"


def _text(name: str) -> str:
    path = DATA_DIR / name
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainDataError(
            f"{path}: cannot read the retail {name} ({getattr(exc, 'strerror', None) or exc}); {_FIX}"
        ) from None


@functools.cache
def _read_json(name: str) -> Any:
    try:
        return json.loads(_text(name))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, and ints over Python's digit limit
        raise DomainDataError(f"{DATA_DIR / name}: not valid JSON ({exc}); {_FIX}") from None


def tasks() -> dict[str, dict[str, Any]]:
    """The retail tasks by id (the parsed, shared objects: do not mutate)."""
    raw = _read_json("tasks.json")
    if not isinstance(raw, list) or not all(isinstance(t, dict) and "id" in t for t in raw):
        raise DomainDataError(
            f"{DATA_DIR / 'tasks.json'}: not a tau2 tasks file (a JSON list of task objects with an 'id'); {_FIX}"
        )
    return {t["id"]: t for t in raw}


def splits() -> dict[str, list[str]]:
    """Task ids per split, as in tau2's split_tasks.json (train, test, base); a task it does not list is in test or
    train by the hash of its id (:func:`~rewardkit.envs.tasks.placed`)."""
    raw = _read_json("split_tasks.json")
    if not isinstance(raw, dict) or not all(isinstance(ids, list) for ids in raw.values()):
        raise DomainDataError(
            f"{DATA_DIR / 'split_tasks.json'}: not a tau2 split file (a JSON object: split name "
            f"-> list of task ids); {_FIX}"
        )
    return placed(raw, tasks())


@functools.cache  # every episode's system prompt: read once per process
def policy() -> str:
    return _text("policy.md")


def guidelines() -> str:
    """tau2-bench's user simulation guidelines."""
    return _text("simulation_guidelines.md")


RETAIL = Domain(
    name="retail",
    make_env=environment(TABLES, TOOLS),  # a private copy of the template database per rollout
    tools=TOOLS,
    tasks=tasks,
    splits=splits,
    policy=policy,
    guidelines=guidelines,
    stop_tools=frozenset({"transfer_to_human_agents"}),
    data_files=DATA_FILES,
)
