"""The retail domain object (registered as ``retail``)."""

from __future__ import annotations

import functools
import json
from typing import Any

from rewardkit.envs.domain import Domain
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.env import RetailEnv
from rewardkit.envs.retail.specs import TOOLS


@functools.cache
def _read_json(name: str) -> Any:
    return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))


def tasks() -> dict[str, dict[str, Any]]:
    """The 114 tau2 retail tasks by id (the parsed, shared objects: do not mutate)."""
    return {t["id"]: t for t in _read_json("tasks.json")}


def splits() -> dict[str, list[str]]:
    """Task ids per split, as in tau2's split_tasks.json (train, test, base)."""
    return _read_json("split_tasks.json")


def policy() -> str:
    return (DATA_DIR / "policy.md").read_text(encoding="utf-8")


RETAIL = Domain(
    name="retail",
    make_env=RetailEnv,
    tools=TOOLS,
    tasks=tasks,
    splits=splits,
    policy=policy,
    stop_tools=frozenset({"transfer_to_human_agents"}),
)
