"""A live-stream merchant console, in Chinese: rooms, products on air, prices, coupons and cue cards, with the
streamer's approval (soft gates) and the platform's red lines (hard gates). Written on the public domain contract
only (docs/livestream.md)."""

from __future__ import annotations

import functools
import json
from typing import Any

from rewardkit.envs.domain import Domain, DomainDataError
from rewardkit.envs.livestream import reads, writes
from rewardkit.envs.livestream.tables import DATA, SEED, TABLES
from rewardkit.envs.sqlite_env import environment
from rewardkit.envs.tool import toolset

# The tools in the order the agent reads them.
TOOLS = toolset(
    reads.get_shop_rules,
    reads.list_live_rooms,
    reads.get_live_room,
    reads.search_products,
    reads.get_product,
    reads.list_past_sessions,
    reads.get_past_session,
    reads.list_coupons,
    writes.create_live_room,
    writes.sync_session_products,
    writes.put_product_on_air,
    writes.change_price,
    writes.issue_coupon,
    writes.write_cue_card,
    writes.enable_smart_titles,
)
FILES = ("tasks.json", "split_tasks.json", "policy.md", "simulation_guidelines.md")
DATA_FILES = (SEED, *(DATA / name for name in FILES))


def text(name: str) -> str:
    path = DATA / name
    try:
        found = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainDataError(f"{path}: cannot read the livestream {name} ({exc})") from None
    if not found.strip():
        raise DomainDataError(f"{path}: the livestream {name} is empty")
    return found


@functools.cache
def read_json(name: str) -> Any:
    try:
        return json.loads(text(name))
    except ValueError as exc:
        raise DomainDataError(f"{DATA / name}: not valid JSON ({exc})") from None


def tasks() -> dict[str, dict[str, Any]]:
    """The tasks by id (the parsed, shared objects: do not mutate)."""
    raw = read_json("tasks.json")
    if not isinstance(raw, list) or not all(isinstance(t, dict) and "id" in t for t in raw):
        raise DomainDataError(f"{DATA / 'tasks.json'}: must be a JSON list of task objects, each with an 'id'")
    return {t["id"]: t for t in raw}


def splits() -> dict[str, list[str]]:
    raw = read_json("split_tasks.json")
    if not isinstance(raw, dict) or not all(isinstance(ids, list) for ids in raw.values()):
        raise DomainDataError(f"{DATA / 'split_tasks.json'}: must be a JSON object of split name -> task ids")
    return raw


DOMAIN = Domain(
    name="livestream",
    make_env=environment(TABLES, TOOLS),
    tools=TOOLS,
    tasks=tasks,
    splits=splits,
    policy=lambda: text("policy.md"),
    guidelines=lambda: text("simulation_guidelines.md"),
    language="zh",
    data_files=DATA_FILES,
)
