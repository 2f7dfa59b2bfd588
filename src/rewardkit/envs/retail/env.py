"""The retail environment: one template database per process, a private copy per rollout."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Any

from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.db import export, fresh_copy, load_file
from rewardkit.envs.retail.specs import TOOLS
from rewardkit.envs.retail.state import StateHasher, track_changes


@functools.lru_cache(maxsize=4)
def template(db_path: str | None = None) -> tuple[sqlite3.Connection, StateHasher]:
    """The database built from ``db_path`` (default: the vendored db.json) and its hasher, once per process."""
    conn = load_file(db_path or DATA_DIR / "db.json")
    track_changes(conn)
    return conn, StateHasher(conn)


class RetailEnv(ToolEnvironment):
    """tau2-bench retail on a private in-memory copy of the template database."""

    domain = "retail"
    tools = TOOLS

    def __init__(self, db_path: str | Path | None = None) -> None:
        base, self._hasher = template(str(db_path) if db_path else None)
        super().__init__(fresh_copy(base))

    def state_hash(self) -> str:
        """The canonical hash of this copy's state (see :mod:`rewardkit.envs.retail.state`)."""
        with self.lock:
            return self._hasher(self.conn)

    def export(self) -> dict[str, Any]:
        with self.lock:
            return export(self.conn)
