"""Spec domains written for a test: ``domain.json``, its schema, seed, tasks, policy and guidelines in a folder."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KEY = {"idempotency_key": {"type": "string", "minLength": 1}}  # every write tool declares it


def write_spec(
    folder: Path,
    schema: str,
    tools: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    seed: Mapping[str, Any],
) -> Path:
    """A spec domain named after ``folder``, written into it: its last task in ``test``, the others in ``train``."""
    folder.mkdir(parents=True)
    (folder / "schema.sql").write_text(schema, encoding="utf-8")
    (folder / "seed.json").write_text(json.dumps(seed), encoding="utf-8")
    (folder / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    (folder / "policy.md").write_text("Answer from the tools; never guess.", encoding="utf-8")
    (folder / "guidelines.md").write_text("Play the user: say what you want, one thing at a time.", encoding="utf-8")
    spec = {
        "name": folder.name,
        "policy": "policy.md",
        "guidelines": "guidelines.md",
        "schema": "schema.sql",
        "seed": "seed.json",
        "tasks": "tasks.json",
        "splits": {"train": [t["id"] for t in tasks[:-1]], "test": [t["id"] for t in tasks[-1:]]},
        "tools": list(tools),
    }
    (folder / "domain.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder


def task(task_id: str, reason: str, actions: Sequence[Mapping[str, Any]], said: Sequence[str] = ()) -> dict[str, Any]:
    """A tau2 task: the user's reason for calling, the gold actions and what the agent must say."""
    return {
        "id": task_id,
        "user_scenario": {"instructions": {"reason_for_call": reason}},
        "evaluation_criteria": {"actions": list(actions), "communicate_info": list(said)},
    }
