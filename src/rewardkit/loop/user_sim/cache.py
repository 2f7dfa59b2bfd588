"""A user simulator's replies in a :class:`~rewardkit.loop.replies.ReplyStore`, keyed by everything that shapes
them: the simulator's fingerprint, the task's scenario, the dialogue and the progress it reads."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from rewardkit.files.jsonl import dumps
from rewardkit.loop.replies import ReplyCacheError, ReplyStore
from rewardkit.loop.user_sim.base import Progress, SimulatorError, Turn, UserSimulator

__all__ = ["CachedSimulator", "ReplyCacheError", "cache_key"]


def cache_key(fingerprint: str, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
    """sha256 of the simulator's identity and its whole input, as canonical JSON."""
    payload = [
        fingerprint,
        task.get("user_scenario"),
        [[turn.role, turn.text] for turn in dialogue],
        [progress.state_done, progress.outputs_said, list(progress.requests), progress.language],
    ]
    return hashlib.sha256(dumps(payload, sort_keys=True).encode()).hexdigest()


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
        self.inner = inner
        self.name = inner.name
        self.ledger = getattr(inner, "ledger", None)  # a model's: the cache's hits are counted on it
        self.path = Path(path)
        self.mode = mode
        self._fingerprint = inner.fingerprint()
        self._store = ReplyStore(self.path, mode, label)

    def fingerprint(self) -> str:
        return self._fingerprint  # the cache returns what inner would have said

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        key = cache_key(self._fingerprint, task, dialogue, progress)
        try:
            found = self._store.get(key)
        except sqlite3.DatabaseError as exc:  # e.g. replay over a file that is not a reply cache
            raise SimulatorError(f"cache:{self.path}", f"cannot read the cache: {exc}") from exc
        if found is not None:
            if self.ledger is not None:
                self.ledger.cache_hit()
            return found
        if self.mode == "replay":
            raise SimulatorError(
                f"cache:{self.path}", "no cached reply for this dialogue; run once with cache_mode read_write"
            )
        text = self.inner.reply(task, dialogue, progress)  # an error propagates and nothing is stored
        return self._store.put(key, self._fingerprint, text)

    def close(self) -> None:
        self._store.close()
