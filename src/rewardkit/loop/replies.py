"""Model replies stored in SQLite, keyed by everything that shaped them: one store for every role that is cached.

Why: GRPO samples many rollouts of the same task, and their early turns often coincide (a greeting, the opening
request, the first lookup); at temperature 0 the reply is the same every time, so it is paid for once. ``replay``
mode re-runs a logged experiment offline, with no endpoint at all. SQLite gives atomic writes across threads and
processes (several ranks of one training job may share the file). The user simulator's cache
(:mod:`rewardkit.loop.user_sim.cache`) and the JSON roles (:mod:`rewardkit.loop.roles`) both keep their replies here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Literal

from rewardkit.errors import UserError

_SCHEMA = """CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, reply TEXT NOT NULL, created REAL NOT NULL
)"""
MODES = ("read_write", "replay")


class ReplyCacheError(UserError, ValueError):
    """The reply cache's path holds something that is not a SQLite reply cache (a user error, named)."""


def _open(path: Path, mode: str, label: str) -> sqlite3.Connection:
    """The cache's connection; a file that is not SQLite (or cannot be opened) is a one-line error naming it."""
    db = None
    try:
        db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the header: "file is not a database"
        if mode == "read_write":
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writing rank
            db.execute(_SCHEMA)
    except sqlite3.DatabaseError as exc:  # OperationalError included: a directory, no permission
        if db is not None:
            db.close()
        raise ReplyCacheError(
            f"{label} {path}: not a SQLite reply cache ({exc}); remove it or choose another path"
        ) from None
    return db


class ReplyStore:
    """``get`` and ``put`` replies by key; ``mode`` "read_write" (create the file when missing) or "replay" (it must
    exist). ``label`` names the path in errors (the CLI's flag or the config key)."""

    def __init__(self, path: str | Path, mode: Literal["read_write", "replay"] = "read_write", label: str = "cache"):
        if mode not in MODES:
            raise ValueError(f"cache mode must be 'read_write' or 'replay', got {mode!r}")
        self.path, self.mode, self.label = Path(path), mode, label
        if mode == "replay":
            if not self.path.is_file():
                raise FileNotFoundError(f"{label} {self.path}: not found; run once with the cache in read_write mode")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection behind a lock: lookups take microseconds next to a model call, and
        # ms-swift's per-call event loops spawn short-lived threads that would each leak one.
        self._lock = threading.Lock()
        self._db = _open(self.path, mode, label)

    def get(self, key: str) -> str | None:
        """The stored reply, or None; a file that cannot be read is :class:`sqlite3.DatabaseError`."""
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, fingerprint: str, reply: str) -> str:
        """Store ``reply`` unless another thread or rank stored this key first; return the stored one (the first
        writer wins, so every rollout sees one dialogue)."""
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO replies (key, fingerprint, reply, created) VALUES (?, ?, ?, ?)",
                (key, fingerprint, reply, time.time()),
            )
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return str(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
