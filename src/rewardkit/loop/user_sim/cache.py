"""Replies of a simulator stored in SQLite, keyed by everything that shapes them.

Why: GRPO samples many rollouts of the same task, and their early turns often coincide
(greeting, opening request, identification); with a temperature-0 simulator the reply is
the same every time, so it is paid for once. ``replay`` mode re-runs a logged experiment
offline, with no endpoint at all. SQLite gives atomic writes across threads and processes
(several ranks of one training job may share the file).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from rewardkit.loop.user_sim.base import Progress, SimulatorError, Turn, UserSimulator

_SCHEMA = """CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, reply TEXT NOT NULL, created REAL NOT NULL
)"""


def cache_key(fingerprint: str, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
    """sha256 of the simulator's identity and its whole input, as canonical JSON."""
    payload = [
        fingerprint,
        task.get("user_scenario"),
        [[turn.role, turn.text] for turn in dialogue],
        [progress.state_done, progress.outputs_said, list(progress.requests), progress.language],
    ]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ReplyCacheError(ValueError):
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


class CachedSimulator:
    """``inner`` behind a reply cache; ``mode`` "read_write" (look up, call on a miss, store) or "replay".

    ``label`` names the cache's path in errors (the CLI's flag; the config key is ``user_sim.cache``)."""

    def __init__(
        self,
        inner: UserSimulator,
        path: str | Path,
        mode: Literal["read_write", "replay"] = "read_write",
        label: str = "--user-cache",
    ):
        if mode not in ("read_write", "replay"):
            raise ValueError(f"cache mode must be 'read_write' or 'replay', got {mode!r}")
        self.inner = inner
        self.name = inner.name
        self.ledger = getattr(inner, "ledger", None)  # a model's: the cache's hits are counted on it
        self.path = Path(path)
        self.mode = mode
        self._fingerprint = inner.fingerprint()
        if mode == "replay":
            if not self.path.is_file():
                raise FileNotFoundError(f"reply cache {self.path} not found; run once with cache_mode read_write")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection behind a lock: lookups take microseconds next to a model call, and
        # ms-swift's per-call event loops spawn short-lived threads that would each leak one.
        self._lock = threading.Lock()
        self._db = _open(self.path, mode, label)

    def fingerprint(self) -> str:
        return self._fingerprint  # the cache returns what inner would have said

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        key = cache_key(self._fingerprint, task, dialogue, progress)
        with self._lock:
            try:
                row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            except sqlite3.DatabaseError as exc:  # e.g. replay over a file that is not a reply cache
                raise SimulatorError(f"cache:{self.path}", f"cannot read the cache: {exc}") from exc
        if row is not None:
            if self.ledger is not None:
                self.ledger.cache_hit()
            return str(row[0])
        if self.mode == "replay":
            raise SimulatorError(
                f"cache:{self.path}", "no cached reply for this dialogue; run once with cache_mode read_write"
            )
        text = self.inner.reply(task, dialogue, progress)  # an error propagates and nothing is stored
        with self._lock:
            # OR IGNORE: another thread or rank may have stored this key meanwhile. The first
            # writer wins and everyone returns its reply, so all rollouts see one dialogue.
            self._db.execute(
                "INSERT OR IGNORE INTO replies (key, fingerprint, reply, created) VALUES (?, ?, ?, ?)",
                (key, self._fingerprint, text, time.time()),
            )
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return str(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
