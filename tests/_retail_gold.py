"""The bundled tau2 retail tasks the rewards cannot judge (tau2-bench's data, unchanged): gold writes that fail on a
fresh database, and golds that change nothing and name nothing an episode must show.

Both are rejected as ``gold_fails`` by ``rewardkit build tau2-grpo`` and raise TaskError in the rewards: a
failed gold write is missing from the gold state, so the state cannot tell the task's outcome from doing less.

- 64: action 6, ``exchange_delivered_order_items`` on #W7464385, fails (PRECONDITION_FAILED: the order is
  pending, not delivered); action 7 then modifies the same pending order, which succeeds.
- 105: action 0, its only write, ``exchange_delivered_order_items`` on #W4316152, fails (INSUFFICIENT_FUNDS:
  the new kettles cost 101.12 + 109.58, the old two 2 x 94.80, a difference of 21.10 against the gift card's
  17.00), so its gold state is the untouched database and an agent that did nothing would score 1.0.

Three are rejected as ``no_evidence``: their gold leaves the database as it was and names no output, transfer or
declined write, so an episode that does nothing reaches it (25 and 65 only read, 57 has no action at all).
"""

from __future__ import annotations

import json
from typing import Any

from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.db import OWN_TABLES
from rewardkit.envs.retail.domain import RETAIL
from rewardkit.envs.sqlite_env import canonical, drop_nulls

# task id -> (index of the failing gold action, its result code)
GOLD_FAILS = {"64": (6, "PRECONDITION_FAILED"), "105": (0, "INSUFFICIENT_FUNDS")}
NO_EVIDENCE = ("25", "57", "65")  # 25 and 57 in train, 65 in test
TASKS = {t["id"]: t for t in json.loads((DATA_DIR / "tasks.json").read_text(encoding="utf-8"))}
ALL_TASKS = list(TASKS)
VALID = [tid for tid in ALL_TASKS if tid not in GOLD_FAILS and tid not in NO_EVIDENCE]  # the tasks the rewards score
SPLITS = RETAIL.splits()  # tau2's split_tasks.json, and any task it does not list placed by its id's hash
LEFT_OUT = {**dict.fromkeys(GOLD_FAILS, "gold_fails"), **dict.fromkeys(NO_EVIDENCE, "no_evidence")}  # id -> reason


def db_state() -> dict[str, Any]:
    """The bundled db.json as retail's state holds it: null-valued keys dropped, and each of retail's own tables a
    multiset of rows, in the order of their JSON text (``Nested.rows``)."""
    raw = drop_nulls(json.loads((DATA_DIR / "db.json").read_text(encoding="utf-8")))
    return {**raw, **{t: sorted(raw[t], key=canonical) for t in OWN_TABLES if t in raw}}


def rows_of(split: str) -> list[str]:
    """The split's task ids that ``build tau2-grpo`` makes rows of, in split order: all but :data:`LEFT_OUT`."""
    return [tid for tid in SPLITS[split] if tid not in LEFT_OUT]


def said_only(task_id: str, write_tools: frozenset[str], stop_tools: frozenset[str]) -> bool:
    """Whether saying the task's expected outputs is the whole task: its gold only reads, makes no transfer (a stop
    tool) and no call it compares (``compare_args``), and holds no declined or refused entry."""
    actions = TASKS[task_id]["evaluation_criteria"].get("actions") or []
    shown = [a for a in actions if a["name"] in write_tools | stop_tools or "compare_args" in a or "outcome" in a]
    return not shown
